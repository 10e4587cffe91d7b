terraform {
  required_providers {
    sless = {
      source = "sless.example/sless/sless"
    }
  }
}

# Configured from SLESS_ENDPOINT and SLESS_TOKEN.
provider "sless" {}

data "sless_namespace" "me" {}

resource "sless_function" "hello" {
  name       = "hello-python"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/src"

  env_vars = {
    GREETING = "hello"
  }
}

output "namespace" {
  value = data.sless_namespace.me.namespace
}

output "invoke_url" {
  description = "POST here with Authorization: Bearer <your token>."
  value       = sless_function.hello.invoke_url
}
