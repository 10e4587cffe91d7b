terraform {
  required_providers {
    sless = {
      source = "sless.example/sless/sless"
    }
  }
}

# Configured from SLESS_ENDPOINT and SLESS_TOKEN.
provider "sless" {}

resource "sless_function" "echo" {
  name       = "echo"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/src"
}

# The function's public face: method, path suffix, query, headers and body
# are passed to it. No token is needed.
resource "sless_trigger" "web" {
  name     = "echo-web"
  function = sless_function.echo.name
  type     = "http"
}

output "url" {
  description = "Try: curl \"$(terraform output -raw url)/hello?name=you\""
  value       = sless_trigger.web.url
}
