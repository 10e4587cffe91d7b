import time


def handler(event, context):
    # The payload arrives as the body; print goes to the function's run log.
    print("report %s at %s" % (event["body"]["kind"], time.strftime("%H:%M:%S")))
    return "ok"
