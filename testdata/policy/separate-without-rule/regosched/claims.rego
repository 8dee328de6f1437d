package regosched.claims

marks.instance := "{pod} of the same instance"

# A separate entry must name its rule, which a denial cites.
separate contains {"mark": "instance"}
