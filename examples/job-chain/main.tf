terraform {
  required_providers {
    sless = {
      source = "sless.example/sless/sless"
    }
  }
}

# Configured from SLESS_ENDPOINT and SLESS_TOKEN.
provider "sless" {}

# 1. A job computes something once: its return value lands in state.
resource "sless_job" "prices" {
  name       = "prices"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/job"
  input      = jsonencode({ numbers = [100, 200, 300] })

  # Bump to run again.
  run_id = 1
}

# 2. A function gets the job's result as an env var.
resource "sless_function" "api" {
  name       = "prices-api"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/api"

  env_vars = {
    TOTAL = sless_job.prices.message
  }
}

output "total" {
  value = jsondecode(sless_job.prices.message)
}

output "invoke_url" {
  value = sless_function.api.invoke_url
}
