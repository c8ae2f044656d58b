output "state_machine_arn" {
  description = "Start an execution of it (no input needed) to run the migrations."
  value       = aws_sfn_state_machine.migrate.arn
}

output "function_arn" {
  description = "The Lambda handler running one unit per invocation."
  value       = aws_lambda_function.migrate.arn
}
