# Runs main.handler once with the input and keeps its return value.
resource "sless_job" "sum" {
  name        = "sum"
  runtime     = "python3.11"
  entrypoint  = "main.handler"
  source_dir  = "${path.module}/job"
  input       = jsonencode({ numbers = [100, 200, 300] })
  memory_mb   = 128
  timeout_sec = 60

  env_vars = {
    MODE = "sum"
  }

  # Bump to run the job again with the same input and code.
  run_id = 1

  # How long apply waits for the build and the run (default 900 s).
  wait_timeout_sec = 900
}

output "sum" {
  value = jsondecode(sless_job.sum.message) # 600
}
