package placement

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// podRecordInformer is an informer on the pods fieldSelector selects,
// stored as stripped records (strip: stripPod or a variant), with its
// factory to start and shut it down. Selection happens on the API server. The factory's own pod
// informer would also index pods by namespace, which nothing here reads
// and every pod would pay for.
func podRecordInformer(client kubernetes.Interface, fieldSelector string, strip cache.TransformFunc) (informers.SharedInformerFactory, cache.SharedIndexInformer) {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(strip))
	i := f.InformerFor(&corev1.Pod{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredPodInformer(client, metav1.NamespaceAll, resync, cache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector = fieldSelector })
	})
	return f, i
}

// recordOf is the record of an object of a pod informer's store or events:
// the object itself where the informer stores records (the cache's own,
// through stripPod), else a record made from a full *corev1.Pod (a foreign
// informer's, NewFromInformers), which is read and never modified.
func recordOf(obj any) (*podRecord, bool) {
	switch o := obj.(type) {
	case *podRecord:
		return o, true
	case *corev1.Pod:
		return newPodRecord(o), true
	}
	return nil, false
}

// recordWriter routes a pod informer's events on stripped records to the
// writers of a store, under the store's write lock, so that writing every
// record again (after a policy change) never overwrites a newer event with
// an older object. Cache and Pending each have one.
type recordWriter struct {
	mu *sync.Mutex
	// upsert and remove are called with mu held.
	upsert func(context.Context, *podRecord)
	remove func(*podRecord)
}

func (w recordWriter) handlers() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: w.add, UpdateFunc: w.update, DeleteFunc: w.delete}
}

func (w recordWriter) add(obj any) {
	r, ok := recordOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.upsert(context.Background(), r)
}

func (w recordWriter) update(oldObj, newObj any) {
	oldPod, ok1 := recordOf(oldObj)
	newPod, ok2 := recordOf(newObj)
	if ok1 && ok2 && samePlacement(oldPod, newPod) {
		// Status churn: nothing a policy reads has changed, skip the policy call.
		return
	}
	w.add(newObj)
}

func (w recordWriter) delete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	r, ok := recordOf(obj)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.remove(r)
}

// rewrite runs swap, then writes every record of store again, all under
// the lock: no event lands between the swap and the last record.
func (w recordWriter) rewrite(ctx context.Context, store cache.Store, swap func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	swap()
	for _, obj := range store.List() {
		if r, ok := recordOf(obj); ok {
			w.upsert(ctx, r)
		}
	}
}
