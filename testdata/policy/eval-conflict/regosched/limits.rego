package regosched.limits

# A complete rule with two different values for a bound pod: the compiler
# cannot see it, describing the smoke test's bound peer fails.
limit := 1 if input.pod.node != ""

limit := 2 if input.pod.name != ""
