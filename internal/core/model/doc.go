// Package model holds the neutral types every part of regosched speaks:
// a pod as the policy reads it (Pod, Labels), what the policy said of it
// (Claims, Mark, Avoid, under an Origin), and the rules' answers
// (Conflict, Penalty). It knows neither the extender's wire types nor the
// scheduling framework's, nor Rego: the cache stores these values, the
// policy fills them, the judge decides with them and the front ends
// translate them.
package model
