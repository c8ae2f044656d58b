output "function_arn" {
  value = aws_lambda_function.guard.arn
}

output "failed_records_queue_url" {
  value = aws_sqs_queue.failed_records.url
}
