package decisionlog

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEventOf: the outcome and the cut lists of every verb, decided once
// for both builds.
func TestEventOf(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name          string
		d             Decision
		wantOutcome   string
		wantTruncated []string
	}{
		{"filter keeps some", Decision{Verb: VerbFilter, Nodes: []string{"a", "b"}, Refused: 1}, OutcomeFeasible, nil},
		{"filter refuses all", Decision{Verb: VerbFilter, Nodes: []string{"a", "b"}, Refused: 2}, OutcomeUnschedulable, nil},
		{"filter of no candidate", Decision{Verb: VerbFilter}, OutcomeUnschedulable, nil},
		{"filter counts beyond the listed", Decision{Verb: VerbFilter, Nodes: []string{"a"}, NodeCount: 300, Refused: 1}, OutcomeFeasible, []string{TruncatedNodes}},
		{"filter fails", Decision{Verb: VerbFilter, Nodes: []string{"a"}, Err: boom}, OutcomeError, nil},
		{"denials cut", Decision{Verb: VerbFilter, Nodes: []string{"a"}, Refused: 1, DeniedCut: true}, OutcomeUnschedulable, []string{TruncatedDenied}},
		{"prioritize scores", Decision{Verb: VerbPrioritize, Scores: map[string]int64{"a": 3}, ScoresCut: true}, OutcomeScored, []string{TruncatedScores}},
		{"prioritize has no preference", Decision{Verb: VerbPrioritize}, OutcomeNoPreference, nil},
		{"preempt keeps a node", Decision{Verb: VerbPreempt, NodeCount: 4, Victims: []Victim{{Node: "a"}}}, OutcomeFeasible, nil},
		{"preempt keeps none", Decision{Verb: VerbPreempt, NodeCount: 4, VictimsCut: true}, OutcomeUnschedulable, []string{TruncatedVictims}},
		{"bind binds", Decision{Verb: VerbBind, Node: "a"}, OutcomeBound, nil},
		{"bind refused", Decision{Verb: VerbBind, Err: boom, BindRefused: true}, OutcomeRefused, nil},
		{"bind fails", Decision{Verb: VerbBind, Err: boom}, OutcomeError, nil},
		{"a refusal counts only for bind", Decision{Verb: VerbFilter, Err: boom, BindRefused: true}, OutcomeError, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := EventOf(tt.d)
			if diff := cmp.Diff([]any{tt.wantOutcome, tt.wantTruncated}, []any{e.Outcome, e.Truncated}); diff != "" {
				t.Errorf("outcome and truncated (-want +got):\n%s", diff)
			}
			if tt.d.Err != nil && e.Error != tt.d.Err.Error() {
				t.Errorf("Error = %q, want %q", e.Error, tt.d.Err.Error())
			}
		})
	}
}
