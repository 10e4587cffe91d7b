terraform {
  required_providers {
    sless = {
      source = "sless.example/sless/sless"
    }
  }
}

# Configured from SLESS_ENDPOINT and SLESS_TOKEN.
provider "sless" {}

# A long-running process of your own; it listens on $PORT. Killed or
# crashed, it is restarted.
resource "sless_service" "web" {
  name       = "web"
  runtime    = "python3.11"
  entrypoint = "app.py"
  source_dir = "${path.module}/src"
  memory_mb  = 128

  # Changing these restarts the process in place, without a rebuild.
  env_vars = {
    GREETING = "hello"
  }
}

output "url" {
  value = sless_service.web.url
}
