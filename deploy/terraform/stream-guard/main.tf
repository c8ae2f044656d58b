# The dynaunique stream guard on AWS Lambda: an event source mapping on the table's stream
# invoking dynaunique.streams.aws_lambda.handler, reporting batch item failures so only the
# failed records are retried; records still failing after the retries go to a queue. The
# function's role is deploy/iam/stream-guard-lambda.json (plus stream-guard-repair.json when
# var.repair, and stream-guard-regions.json when var.regions is set). On a global table, use the
# module once per region, each on its own replica's stream ("The stream guard on a global table"
# in docs/deploying.md). See "Stream guard" in docs/operating-locks.md.

locals {
  placeholder_arn = "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/TABLE_NAME"
  # The table in any region (stream-guard-regions.json's condition names which), and in the
  # home region, where a global table's repairs are written.
  placeholder_any_region_arn = "arn:aws:dynamodb:*:ACCOUNT_ID:table/TABLE_NAME"
  any_region_arn             = replace(var.table_arn, "/^(arn:[^:]+:dynamodb:)[^:]+:/", "$${1}*:")
  home_table_arn = (var.home_region == "" ? var.table_arn :
  replace(var.table_arn, "/^(arn:[^:]+:dynamodb:)[^:]+:/", "$${1}${var.home_region}:"))
  repair_policy = jsondecode(file("${path.module}/../../iam/stream-guard-repair.json"))
}

data "aws_iam_policy_document" "lambda_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_sqs_queue" "failed_records" {
  name                      = "${var.function_name}-failed-records"
  message_retention_seconds = 1209600
  sqs_managed_sse_enabled   = true
}

resource "aws_iam_role" "function" {
  name               = "${var.function_name}-function"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
}

resource "aws_iam_role_policy" "guard" {
  name = "dynaunique-stream-guard"
  role = aws_iam_role.function.id
  policy = replace(
    file("${path.module}/../../iam/stream-guard-lambda.json"),
    local.placeholder_arn,
    var.table_arn,
  )
}

resource "aws_iam_role_policy" "repair" {
  count = var.repair ? 1 : 0
  name  = "dynaunique-stream-guard-repair"
  role  = aws_iam_role.function.id
  # The writes on the home region's table (DescribeTable, asked by every read, is the
  # function's own policy's).
  policy = jsonencode(merge(local.repair_policy, {
    Statement = [for statement in local.repair_policy.Statement : merge(statement, {
      Resource = [local.home_table_arn]
    })]
  }))
}

resource "aws_iam_role_policy" "regions" {
  count = length(var.regions) > 0 ? 1 : 0
  name  = "dynaunique-stream-guard-regions"
  role  = aws_iam_role.function.id
  policy = replace(
    replace(
      file("${path.module}/../../iam/stream-guard-regions.json"),
      local.placeholder_any_region_arn,
      local.any_region_arn,
    ),
    "\"REGIONS\"",
    join(", ", [for region in var.regions : jsonencode(region)]),
  )
}

data "aws_iam_policy_document" "failed_records" {
  statement {
    actions   = ["sqs:SendMessage"]
    resources = [aws_sqs_queue.failed_records.arn]
  }
}

resource "aws_iam_role_policy" "failed_records" {
  name   = "failed-records"
  role   = aws_iam_role.function.id
  policy = data.aws_iam_policy_document.failed_records.json
}

resource "aws_iam_role_policy_attachment" "logs" {
  role       = aws_iam_role.function.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
}

resource "aws_lambda_function" "guard" {
  function_name = var.function_name
  description   = "dynaunique stream guard - re-checks the lock values each change touches."
  runtime       = "python3.12"
  handler       = "dynaunique.streams.aws_lambda.handler"
  filename      = var.package_path
  role          = aws_iam_role.function.arn
  timeout       = 120
  memory_size   = 512

  environment {
    # The settings left empty are not set (a one-region table: no DYNAUNIQUE_REGIONS).
    variables = { for name, value in {
      DYNAUNIQUE_MODULE      = var.models_module
      DYNAUNIQUE_REPAIR      = var.repair ? "true" : "false"
      DYNAUNIQUE_REGIONS     = join(",", var.regions)
      DYNAUNIQUE_HOME_REGION = var.home_region
    } : name => value if value != "" }
  }
}

resource "aws_lambda_event_source_mapping" "stream" {
  event_source_arn                   = var.stream_arn
  function_name                      = aws_lambda_function.guard.arn
  starting_position                  = var.starting_position
  batch_size                         = var.batch_size
  maximum_batching_window_in_seconds = 1
  # The handler answers {"batchItemFailures": [...]}: Lambda retries from the first failed
  # record, not the whole batch.
  function_response_types        = ["ReportBatchItemFailures"]
  bisect_batch_on_function_error = true
  maximum_retry_attempts         = 10

  destination_config {
    on_failure {
      destination_arn = aws_sqs_queue.failed_records.arn
    }
  }
}
