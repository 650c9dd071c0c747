"""A training objective that reports every ``stride`` steps, ``reports`` times at most
(``loss = x + 1 / step``), and stops when told; it returns the steps it trained."""


def run(params: dict, ctx) -> dict:
    x, stride, reports = float(params["x"]), int(params["stride"]), int(params["reports"])
    step, loss = 0, x + 1.0
    for _ in range(reports):
        step += stride
        loss = x + 1.0 / step
        if ctx.report(step=step, metrics={"loss": loss}).stop:
            break
    return {"loss": loss, "steps": step}
