import json
import os


def handler(event, context):
    return {"total": json.loads(os.environ["TOTAL"])}
