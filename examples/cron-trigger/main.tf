terraform {
  required_providers {
    sless = {
      source = "sless.example/sless/sless"
    }
  }
}

# Configured from SLESS_ENDPOINT and SLESS_TOKEN.
provider "sless" {}

resource "sless_function" "report" {
  name       = "report"
  runtime    = "python3.11"
  entrypoint = "main.handler"
  source_dir = "${path.module}/src"
}

# Every minute; a run still going skips the next tick (never two at once).
# Six fields ("*/10 * * * * *") schedule with a seconds resolution.
resource "sless_trigger" "every_minute" {
  name     = "report-every-minute"
  function = sless_function.report.name
  type     = "cron"
  schedule = "* * * * *"
  payload  = jsonencode({ kind = "minutely" })
}

# Active once the function is Ready. (next_run_at and last_run_at are
# refreshed on every plan; an output of them would change on every plan.)
output "phase" {
  value = sless_trigger.every_minute.phase
}
