package regosched.claims

import data.regosched.limits.limit

marks.instance := "{pod} of the same instance"

separate contains {"mark": "instance", "rule": "sample"} if limit > 0
