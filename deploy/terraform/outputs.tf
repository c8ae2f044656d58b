output "table_name" {
  value = aws_dynamodb_table.this.name
}

output "table_arn" {
  value = aws_dynamodb_table.this.arn
}

output "policy_arns" {
  description = "The IAM policy ARN of each role: application, operator, migrator."
  value       = { for role, policy in aws_iam_policy.role : role => policy.arn }
}
