package placement

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/regosched/regosched/internal/core/model"
)

type entry struct {
	pod  *model.Pod
	keys []string
}

// index groups the indexed pods for peer look-ups.
type index struct {
	byName map[string]*entry                // namespace/name -> entry
	byUID  map[types.UID]string             // uid -> namespace/name
	groups map[string]map[string]*model.Pod // group key -> namespace/name -> pod
	// assumed holds the pods recorded by the bind verb and not yet seen
	// bound by the informer, by name (a re-index may have copied the
	// indexed pod). Apart from entry, which every cached pod has, because
	// only a few pods are ever assumed at once.
	assumed map[string]*assumption
}

// assumption is a pod recorded by the bind verb, as given to Assume, with
// the other incarnations of its name (UIDs) that the cache or its informer
// held then: older ones, whose late events must not replace it.
type assumption struct {
	origin *model.Pod
	older  []types.UID
}

func newIndex() index {
	return index{byName: map[string]*entry{}, byUID: map[types.UID]string{}, groups: map[string]map[string]*model.Pod{},
		assumed: map[string]*assumption{}}
}

// add puts a pod in its groups; a pod without groups is left out.
// a, when set, is the bind verb's record: the pod is assumed.
func (ix *index) add(name string, pod *model.Pod, keys []string, a *assumption) {
	if len(keys) == 0 {
		return
	}
	if a != nil {
		ix.assumed[name] = a
	}
	ix.byName[name] = &entry{pod: pod, keys: keys}
	ix.byUID[pod.UID] = name
	for _, k := range keys {
		g := ix.groups[k]
		if g == nil {
			g = map[string]*model.Pod{}
			ix.groups[k] = g
		}
		g[name] = pod
	}
}

// remove takes a pod out of every group.
func (ix *index) remove(name string) {
	e, ok := ix.byName[name]
	if !ok {
		return
	}
	delete(ix.byName, name)
	delete(ix.assumed, name)
	delete(ix.byUID, e.pod.UID)
	for _, k := range e.keys {
		delete(ix.groups[k], name)
		if len(ix.groups[k]) == 0 {
			delete(ix.groups, k)
		}
	}
}
