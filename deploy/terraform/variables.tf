variable "table_name" {
  description = "The models' Meta.table_name."
  type        = string
}

variable "hash_key" {
  description = "The hash key attribute (the models' hash_key attr_name); a string, as lock items store UNIQ#<LOCKNAME>#<value> in it."
  type        = string
  default     = "pk"
}

variable "range_key" {
  description = "The range key attribute, or null for a table without one; a string, as lock items store LOCK in it."
  type        = string
  default     = null
}

variable "ttl_attribute" {
  description = "The TTLAttribute's attr_name when a model of this table has one (its lock items carry the same expiry); null when none does."
  type        = string
  default     = null
}

variable "policy_name_prefix" {
  description = "Prefix of the three IAM policies' names (default: the table name)."
  type        = string
  default     = null
}

# A global table (docs/deploying.md, "A global table"): chosen when the table is created.

variable "replica_regions" {
  description = "The regions other than the provider's that hold a replica: empty (the default) for a one-region table; one or more for a global table (STRONG: two, or one with witness_region)."
  type        = list(string)
  default     = []

  validation {
    condition = alltrue([for region in var.replica_regions : can(regex("^[a-z]{2}(-[a-z]+)+-[0-9]+$", region))]) && length(distinct(var.replica_regions)) == length(var.replica_regions)
    error_message = "replica_regions: region names (such as eu-west-1), each once."
  }
}

variable "multi_region_consistency" {
  description = "The global table's consistency mode, fixed at creation: EVENTUAL (MREC; dynaunique writes every lock in one home region) or STRONG (MRSC: exactly three regions of one region set; dynaunique writes there without transactions, and migrate refuses it)."
  type        = string
  default     = "EVENTUAL"

  validation {
    condition     = contains(["EVENTUAL", "STRONG"], var.multi_region_consistency)
    error_message = "multi_region_consistency: EVENTUAL or STRONG."
  }
}

variable "witness_region" {
  description = "With STRONG and one replica region, the witness region (it holds no replica); else null."
  type        = string
  default     = null
}

variable "home_region" {
  description = "Where dynaunique writes the locks of an EVENTUAL global table (the applications' DYNAUNIQUE_HOME_REGION, output as home_region): the provider's region (null, the default) or one of replica_regions."
  type        = string
  default     = null
}

