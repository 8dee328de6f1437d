package judge

import (
	"context"
	"fmt"
)

// Placed is s's pod as its peers will read it once it stands on node: on
// the node, with its marks (it was described as a pending pod, with what
// it avoids). The front ends record it in the placements before the
// binding is seen (the extender's bind verb, the plugin's Reserve), so
// that the next peer judged counts it.
func (j *Judge) Placed(ctx context.Context, s *Subject, node string) (*Pod, error) {
	placed := *s.Pod
	placed.Node = node
	if len(s.Keys) == 0 {
		// In no group: no peer ever reads its marks.
		return &placed, nil
	}
	var err error
	if _, placed.Claims, err = s.Policy.DescribePeer(ctx, &placed); err != nil {
		return nil, fmt.Errorf("describing pod %s on node %s: %w", s.Pod.Key(), node, err)
	}
	return &placed, nil
}
