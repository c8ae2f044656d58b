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
