# dynaunique migrate on AWS Step Functions: a Distributed Map over the segments of the current
# phase, each item invoking the Lambda handler until it stops answering "more", phase after
# phase. The state machine is deploy/stepfunctions/migrate.asl.json; the function's role has the
# proven migrator policy, deploy/iam/migrator.json. See docs/migrations.md.

locals {
  placeholder_arn = "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/TABLE_NAME"
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

resource "aws_iam_role" "function" {
  name               = "${var.state_machine_name}-function"
  assume_role_policy = data.aws_iam_policy_document.lambda_assume.json
}

resource "aws_iam_role_policy" "migrator" {
  name = "dynaunique-migrator"
  role = aws_iam_role.function.id
  policy = replace(
    file("${path.module}/../../iam/migrator.json"),
    local.placeholder_arn,
    var.table_arn,
  )
}

resource "aws_iam_role_policy_attachment" "logs" {
  role       = aws_iam_role.function.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
}

resource "aws_lambda_function" "migrate" {
  function_name = "${var.state_machine_name}-unit"
  description   = "dynaunique migrate, one time-bounded unit per invocation."
  runtime       = "python3.12"
  handler       = "dynaunique.migrations.aws_lambda.handler"
  filename      = var.package_path
  role          = aws_iam_role.function.arn
  timeout       = var.function_timeout
  memory_size   = 512

  environment {
    variables = merge(
      {
        DYNAUNIQUE_MODULE         = var.models_module
        DYNAUNIQUE_TOTAL_SEGMENTS = tostring(var.total_segments)
        DYNAUNIQUE_LEASE_SECONDS  = tostring(var.lease_seconds)
        DYNAUNIQUE_CONCURRENCY    = tostring(var.concurrency)
      },
      var.max_wcu == null ? {} : { DYNAUNIQUE_MAX_WCU = tostring(var.max_wcu) },
      var.max_rcu == null ? {} : { DYNAUNIQUE_MAX_RCU = tostring(var.max_rcu) },
    )
  }
}

data "aws_caller_identity" "current" {}

data "aws_region" "current" {}

data "aws_iam_policy_document" "states_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["states.amazonaws.com"]
    }
  }
}

data "aws_iam_policy_document" "states" {
  statement {
    sid       = "InvokeTheHandler"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.migrate.arn, "${aws_lambda_function.migrate.arn}:*"]
  }
  statement {
    sid     = "RunTheDistributedMap"
    actions = ["states:StartExecution"]
    resources = [
      "arn:aws:states:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:stateMachine:${var.state_machine_name}",
    ]
  }
  statement {
    sid     = "WatchTheMapsChildExecutions"
    actions = ["states:DescribeExecution", "states:StopExecution"]
    resources = [
      "arn:aws:states:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:execution:${var.state_machine_name}/*",
    ]
  }
}

resource "aws_iam_role" "state_machine" {
  name               = "${var.state_machine_name}-states"
  assume_role_policy = data.aws_iam_policy_document.states_assume.json
}

resource "aws_iam_role_policy" "state_machine" {
  name   = "dynaunique-migrate"
  role   = aws_iam_role.state_machine.id
  policy = data.aws_iam_policy_document.states.json
}

resource "aws_sfn_state_machine" "migrate" {
  name     = var.state_machine_name
  role_arn = aws_iam_role.state_machine.arn
  definition = templatefile("${path.module}/../../stepfunctions/migrate.asl.json", {
    MigrateFunctionArn = aws_lambda_function.migrate.arn
  })
}
