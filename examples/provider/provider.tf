terraform {
  required_providers {
    sless = {
      source = "sless.example/sless/sless"
    }
  }
}

# endpoint and token may also come from SLESS_ENDPOINT and SLESS_TOKEN.
provider "sless" {
  endpoint = "http://127.0.0.1:8080"
  token    = var.sless_token

  # Optional: check the token against the cloud API before anything else.
  # nubes_endpoint = "https://api.nubes.example/v1/me"

  request_timeout_sec = 60
  wait_timeout_sec    = 600
}

variable "sless_token" {
  type      = string
  sensitive = true
}

data "sless_namespace" "me" {}

output "namespace" {
  value = data.sless_namespace.me.namespace
}
