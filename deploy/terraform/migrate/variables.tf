variable "table_arn" {
  description = "The ARN of the table the models and the migrations ledger live in (the parent module's table_arn output)."
  type        = string
}

variable "package_path" {
  description = "A zip of dynaunique, its dependencies, your models module and its dynamigrations/."
  type        = string
}

variable "models_module" {
  description = "The models module as a dotted path (DYNAUNIQUE_MODULE)."
  type        = string
}

variable "total_segments" {
  description = "Segments each phase is split into; the Map runs one item per segment."
  type        = number
  default     = 8
}

variable "lease_seconds" {
  description = "How long a segment's lease outlives an invocation that died."
  type        = number
  default     = 60
}

variable "max_wcu" {
  description = "Cap on write capacity units per second over all items (DYNAUNIQUE_MAX_WCU); null for none."
  type        = number
  default     = null
}

variable "max_rcu" {
  description = "Cap on read capacity units per second over all items (DYNAUNIQUE_MAX_RCU); null for none."
  type        = number
  default     = null
}

variable "concurrency" {
  description = "Lock writes in flight per segment (DYNAUNIQUE_CONCURRENCY); 1 is one at a time."
  type        = number
  default     = 1

  validation {
    condition     = var.concurrency >= 1 && var.concurrency <= 64 && floor(var.concurrency) == var.concurrency
    error_message = "concurrency is a whole number from 1 to 64."
  }
}

variable "function_timeout" {
  description = "The function's timeout in seconds; each invocation stops at a checkpoint 20 s before it."
  type        = number
  default     = 900
}

variable "state_machine_name" {
  description = "The state machine's name (also the prefix of the function's and roles' names)."
  type        = string
  default     = "dynaunique-migrate"
}
