resource "sless_function" "hello" {
  name        = "hello"
  runtime     = "python3.11"
  entrypoint  = "main.handler"
  source_dir  = "${path.module}/src"
  memory_mb   = 128
  timeout_sec = 30

  # Stop the process after 5 idle minutes; the next request starts it again.
  min_instances    = 0
  idle_timeout_sec = 300

  env_vars = {
    GREETING = "hello"
  }

  # How long apply waits for the build (default: the provider's, 600 s).
  wait_timeout_sec = 900
}

output "invoke_url" {
  value = sless_function.hello.invoke_url
}
