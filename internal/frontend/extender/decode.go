package extender

import (
	"errors"
	"fmt"

	gojson "github.com/goccy/go-json"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// argsDecoder reads the body of filter and prioritize, into recycled
// NodeNames.
type argsDecoder struct {
	names recycled[string]
}

// decodeJSON decodes one JSON document into v and rejects anything after it.
//
// It uses goccy/go-json, a drop-in replacement for encoding/json (same
// struct tags, case-insensitive keys, json.Unmarshaler methods, errors),
// because decoding the scheduler's request is most of an extender's work
// and it decodes several times faster (docs/performance.md). Decoded
// strings share a few blocks per request instead of one allocation each;
// the decisions keep them no longer than a pod stays in flight.
func decodeJSON(data []byte, v any, what string) error {
	if err := gojson.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decoding %s: %w", what, err)
	}
	return nil
}

// decode decodes body; release gives the result's memory back.
func (a *argsDecoder) decode(body []byte) (*extenderv1.ExtenderArgs, error) {
	room := a.names.get()
	args, err := decodeArgs(body, room)
	if err != nil || args.NodeNames == nil || len(*args.NodeNames) == 0 {
		// Nothing will read room: back it goes, cleared to its capacity as
		// a failed decode may have written into it.
		a.names.put(room[:cap(room)])
	}
	return args, err
}

// release recycles the NodeNames of args, decoded by decode, once nothing
// reads them: after the answer, which may share them, is written and logged.
func (a *argsDecoder) release(args *extenderv1.ExtenderArgs) {
	if args.NodeNames != nil && len(*args.NodeNames) > 0 {
		a.names.put(*args.NodeNames)
	}
}

// decodeArgs decodes the body of filter and prioritize. NodeNames are
// decoded into room when it has any (room is then the caller's no more);
// room may be nil.
func decodeArgs(body []byte, room []string) (*extenderv1.ExtenderArgs, error) {
	var args extenderv1.ExtenderArgs
	names := room[:0]
	if cap(names) > 0 {
		args.NodeNames = &names
	}
	err := decodeJSON(body, &args, "ExtenderArgs")
	if err == nil && args.NodeNames == &names {
		switch {
		case names == nil:
			args.NodeNames = nil // "NodeNames": null, as with full Node objects
		case len(names) == 0:
			// An empty list and no NodeNames key at all both leave room
			// empty. The scheduler sends neither (it sends null or
			// candidates), so telling them apart may cost a second decode.
			args = extenderv1.ExtenderArgs{}
			err = decodeJSON(body, &args, "ExtenderArgs")
		}
	}
	if err != nil {
		return nil, err
	}
	if args.Pod == nil {
		return nil, errors.New("ExtenderArgs has no Pod")
	}
	if args.NodeNames == nil && args.Nodes == nil {
		return nil, errors.New("ExtenderArgs has neither NodeNames nor Nodes")
	}
	return &args, nil
}

// decodePreemptionArgs reads the body of preempt.
func decodePreemptionArgs(body []byte) (*extenderv1.ExtenderPreemptionArgs, error) {
	var args extenderv1.ExtenderPreemptionArgs
	if err := decodeJSON(body, &args, "ExtenderPreemptionArgs"); err != nil {
		return nil, err
	}
	if args.Pod == nil {
		return nil, errors.New("ExtenderPreemptionArgs has no Pod")
	}
	return &args, nil
}

// decodeBindingArgs reads the body of bind.
func decodeBindingArgs(body []byte) (*extenderv1.ExtenderBindingArgs, error) {
	var args extenderv1.ExtenderBindingArgs
	if err := decodeJSON(body, &args, "ExtenderBindingArgs"); err != nil {
		return nil, err
	}
	if args.PodName == "" || args.PodNamespace == "" || args.PodUID == "" || args.Node == "" {
		return nil, errors.New("ExtenderBindingArgs needs PodName, PodNamespace, PodUID and Node")
	}
	return &args, nil
}
