"""What the trainer's end-to-end scripts share: a list of named checks that prints each verdict
and keeps the failures, so that a script reports every failure before it exits non-zero."""


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, what, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
        if not ok:
            self.failures.append(what)
