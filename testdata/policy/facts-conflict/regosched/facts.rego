package regosched

# Two different values for any pod with a name: evaluation fails.
facts := "a" if input.pod.name != ""

facts := "b" if input.pod.namespace != ""
