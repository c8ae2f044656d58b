# A DynamoDB table ready for dynaunique, and the IAM policies of its roles.
# See docs/deploying.md.

locals {
  prefix = coalesce(var.policy_name_prefix, var.table_name)
  # The policy documents are deploy/iam/*.json with the placeholder ARN replaced: one source for
  # this module, the CloudFormation template's policies and the test that proves them.
  placeholder_arn = "arn:aws:dynamodb:REGION:ACCOUNT_ID:table/TABLE_NAME"
  roles = {
    application = "saves, updates, deletes, get_by_unique, atomic()"
    operator    = "dynaunique locks, check, repair"
    migrator    = "dynaunique makemigrations, migrate, showmigrations"
    # The stream guard: dynaunique watch, and what its --repair adds (docs/operating-locks.md).
    stream-guard        = "dynaunique watch (reads, checkpoints, the stream)"
    stream-guard-repair = "what dynaunique watch --repair adds"
  }
}

resource "aws_dynamodb_table" "this" {
  name         = var.table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = var.hash_key
  range_key    = var.range_key

  # The stream guard reads it (deploy/terraform/stream-guard consumes it with a Lambda function).
  stream_enabled   = true
  stream_view_type = "NEW_AND_OLD_IMAGES"

  attribute {
    name = var.hash_key
    type = "S"
  }

  dynamic "attribute" {
    for_each = var.range_key == null ? [] : [var.range_key]
    content {
      name = attribute.value
      type = "S"
    }
  }

  # Lock items carry the record's expiry in the same attribute, so TTL deletes both.
  dynamic "ttl" {
    for_each = var.ttl_attribute == null ? [] : [var.ttl_attribute]
    content {
      attribute_name = ttl.value
      enabled        = true
    }
  }

  # Restores to any second of the last 35 days: take it before every `dynaunique migrate`.
  point_in_time_recovery {
    enabled = true
  }

  server_side_encryption {
    enabled = true
  }

  deletion_protection_enabled = true

  lifecycle {
    prevent_destroy = true
  }
}

resource "aws_iam_policy" "role" {
  for_each = local.roles

  name        = "${local.prefix}-dynaunique-${each.key}"
  description = "dynaunique ${each.key} role: ${each.value}."
  policy = replace(
    file("${path.module}/../iam/${each.key}.json"),
    local.placeholder_arn,
    aws_dynamodb_table.this.arn,
  )
}
