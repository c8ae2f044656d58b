output "table_name" {
  value = aws_dynamodb_table.this.name
}

output "table_arn" {
  value = aws_dynamodb_table.this.arn
}

output "stream_arn" {
  value = aws_dynamodb_table.this.stream_arn
}

output "policy_arns" {
  description = "The IAM policy ARN of each role: application, operator, migrator, stream-guard, stream-guard-repair."
  value       = { for role, policy in aws_iam_policy.role : role => policy.arn }
}
