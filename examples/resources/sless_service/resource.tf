# A long-running process of your own that listens on $PORT.
resource "sless_service" "web" {
  name        = "web"
  runtime     = "python3.11"
  entrypoint  = "app.py"
  source_dir  = "${path.module}/src"
  memory_mb   = 256
  timeout_sec = 30
  health_path = "/healthz"

  env_vars = {
    GREETING = "hello"
  }
}

output "service_url" {
  value = sless_service.web.url
}
