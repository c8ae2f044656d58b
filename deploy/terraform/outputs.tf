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

# A global table's regions, for the stream guard module's regions (one use per replica), and its
# home region, for the applications' DYNAUNIQUE_HOME_REGION; null on a one-region table.
output "regions" {
  value = length(var.replica_regions) == 0 ? null : local.regions
}

output "home_region" {
  value = length(var.replica_regions) == 0 || var.multi_region_consistency == "STRONG" ? null : coalesce(var.home_region, local.here)
}
