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
  # A global table's regions: the provider's (where this module runs) first, then the replicas'.
  here    = data.aws_region.current.region
  regions = concat([local.here], var.replica_regions)
  # The region sets AWS lists for MRSC (a STRONG table's three regions are of one of them).
  mrsc_region_sets = [
    ["us-east-1", "us-east-2", "us-west-2"],
    ["eu-west-1", "eu-west-2", "eu-west-3", "eu-central-1"],
    ["ap-northeast-1", "ap-northeast-2", "ap-northeast-3"],
  ]
  mrsc_regions = concat(local.regions, var.witness_region == null ? [] : [var.witness_region])
}

data "aws_region" "current" {}

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

  # A global table: a replica per region named, with this table's settings where AWS keeps them
  # per replica (the provider defaults PITR and deletion protection to off on a replica).
  dynamic "replica" {
    for_each = var.replica_regions
    content {
      region_name                 = replica.value
      consistency_mode            = var.multi_region_consistency
      point_in_time_recovery      = true
      deletion_protection_enabled = true
    }
  }

  dynamic "global_table_witness" {
    for_each = var.witness_region == null ? [] : [var.witness_region]
    content {
      region_name = global_table_witness.value
    }
  }

  server_side_encryption {
    enabled = true
  }

  deletion_protection_enabled = true

  lifecycle {
    prevent_destroy = true

    # Refused at plan, before anything is created: what AWS refuses for a global table (or
    # refuses only once the table is half made), and a home region that holds no replica.
    precondition {
      condition     = !contains(var.replica_regions, local.here)
      error_message = "replica_regions: name the other regions; the provider's region holds the table itself."
    }
    precondition {
      condition     = var.multi_region_consistency == "EVENTUAL" || length(var.replica_regions) + (var.witness_region == null ? 0 : 1) == 2
      error_message = "STRONG takes exactly three regions: the provider's and two replica_regions, or one replica region and a witness_region."
    }
    precondition {
      condition     = var.multi_region_consistency == "EVENTUAL" || anytrue([for set in local.mrsc_region_sets : length(setsubtract(local.mrsc_regions, set)) == 0])
      error_message = "STRONG's three regions must be of one region set: us-east-1, us-east-2, us-west-2; eu-west-1, eu-west-2, eu-west-3, eu-central-1; or ap-northeast-1, ap-northeast-2, ap-northeast-3."
    }
    precondition {
      condition     = var.witness_region == null || (var.multi_region_consistency == "STRONG" && !contains(local.regions, coalesce(var.witness_region, "-")))
      error_message = "witness_region: for STRONG only, and a region that holds no replica."
    }
    precondition {
      condition     = var.home_region == null || (var.multi_region_consistency == "EVENTUAL" && contains(local.regions, coalesce(var.home_region, "-")))
      error_message = "home_region: a region holding a replica (the provider's or one of replica_regions), on an EVENTUAL table (a STRONG one has no home region)."
    }
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
