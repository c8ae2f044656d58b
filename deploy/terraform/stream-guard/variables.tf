variable "table_arn" {
  description = "The table's ARN (the table module's table_arn output)."
  type        = string
}

variable "stream_arn" {
  description = "The table's stream ARN (the table module's stream_arn output)."
  type        = string
}

variable "package_path" {
  description = "A zip of dynaunique, its dependencies and your models."
  type        = string
}

variable "models_module" {
  description = "The models module, as a dotted path (DYNAUNIQUE_MODULE)."
  type        = string
}

variable "function_name" {
  description = "The function's name (also the prefix of its role and queue)."
  type        = string
  default     = "dynaunique-stream-guard"
}

variable "repair" {
  description = "Send the audit's guarded repair for what is found (DYNAUNIQUE_REPAIR)."
  type        = bool
  default     = false
}

variable "regions" {
  description = "A global table's replicas, this function's region among them (DYNAUNIQUE_REGIONS): every lock key a change touches is also read in each. Empty: a one-region table."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.regions) != 1
    error_message = "The guard compares two regions or more: name every replica, or none."
  }
}

variable "home_region" {
  description = "A global table's home region (DYNAUNIQUE_HOME_REGION), where repairs write; empty when the models name it (Meta.home_region) or the table is not global."
  type        = string
  default     = ""
}

variable "batch_size" {
  description = "Stream records per invocation (each distinct lock value costs one TransactGetItems)."
  type        = number
  default     = 100
}

variable "starting_position" {
  description = "Where the mapping starts reading when it is created: TRIM_HORIZON or LATEST."
  type        = string
  default     = "TRIM_HORIZON"
}
