"""jaxgpt against torch_ref: the checks pytest and the report share, the report, the sensitivity
study, step-by-step bisection, one record `.pt` through both frameworks."""
