terraform {
  required_version = ">= 1.2" # lifecycle preconditions

  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.22" # aws_dynamodb_table global_table_witness
    }
  }
}
