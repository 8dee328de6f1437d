// Package certroll rolls a Deployment when the certificate Secret its pods
// read changes. kube-scheduler reads an extender's CA file once, at start:
// its extender transport is built from rest.TLSConfigFor, which never reloads
// the CA, so after the CA is renewed the running scheduler refuses
// regosched's new serving certificate. (client-go 0.36 and later re-read the
// client pair on new connections; older ones read it once too.) Rolling on a
// change of either keeps every scheduler version current.
//
// The Deployment's own annotation Annotation records the certificate its pods
// were last rolled for (or, the first time, found running with). When the
// Secret's certificate differs from it, the pod template gets the new value
// too, which makes the Deployment controller replace the pods one by one;
// with two replicas, leader election and a PodDisruptionBudget the profile
// keeps a scheduler throughout.
package certroll

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Annotation holds the SHA-256 of the certificate (ca.crt and tls.crt) on the
// Deployment and on its pod template.
const Annotation = "regosched.io/client-cert-sha256"

// DefaultResync is how often the Secret is compared with the Deployment even
// without an event: a replica that becomes leader, or a Deployment edited by
// hand, is caught up within it.
const DefaultResync = time.Minute

// Config says which Secret and which Deployment, both in Namespace.
type Config struct {
	Client     kubernetes.Interface
	Namespace  string
	Secret     string
	Deployment string
	// Leading says whether this replica may act; nil means always. Two
	// replicas patching at once would roll the scheduler twice.
	Leading func() bool
	// Resync is DefaultResync when 0.
	Resync time.Duration
	Log    logrus.FieldLogger
}

// Check refuses a half-given configuration.
func (c Config) Check() error {
	switch {
	case c.Client == nil:
		return errors.New("certroll: no Kubernetes client")
	case c.Namespace == "":
		return errors.New("certroll: no namespace")
	case c.Secret == "" || c.Deployment == "":
		return fmt.Errorf("certroll: both the Secret (%q) and the Deployment (%q) are needed", c.Secret, c.Deployment)
	}
	return nil
}

// Outcome is what one Reconcile did.
type Outcome string

// The outcomes of Reconcile.
const (
	// NoCertificate: the Secret is missing or holds no tls.crt yet.
	NoCertificate Outcome = "no-certificate"
	// Recorded: the Deployment had no record; the current certificate is
	// written onto it, and its pods are left running.
	Recorded Outcome = "recorded"
	// Unchanged: the Deployment was rolled for this certificate already.
	Unchanged Outcome = "unchanged"
	// Rolled: the pod template now names the new certificate.
	Rolled Outcome = "rolled"
)

// Fingerprint is the hex SHA-256 of what the scheduler reads from the Secret
// once: the CA it verifies regosched with and its own certificate. The key
// is left out: it changes only with the certificate.
func Fingerprint(s *corev1.Secret) (string, bool) {
	crt := s.Data[corev1.TLSCertKey]
	if len(crt) == 0 {
		return "", false
	}
	h := sha256.New()
	// Length-prefixed, so that bytes moved from one key to the other change
	// the sum.
	for _, part := range [][]byte{s.Data["ca.crt"], crt} {
		fmt.Fprintf(h, "%d\n", len(part))
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)), true
}

// Reconcile compares the Secret with the Deployment once and patches the
// Deployment if its pods run with an older certificate.
func Reconcile(ctx context.Context, c Config, secret *corev1.Secret) (Outcome, error) {
	if secret == nil {
		return NoCertificate, nil
	}
	sum, ok := Fingerprint(secret)
	if !ok {
		return NoCertificate, nil
	}
	d, err := c.Client.AppsV1().Deployments(c.Namespace).Get(ctx, c.Deployment, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading Deployment %s/%s: %w", c.Namespace, c.Deployment, err)
	}
	recorded := d.Annotations[Annotation]
	if recorded == sum {
		return Unchanged, nil
	}
	meta := map[string]any{"annotations": map[string]string{Annotation: sum}}
	patch := map[string]any{"metadata": meta}
	outcome := Recorded
	// Without a record, the pods could have started with any certificate
	// the Secret held; they most likely read the current one, and rolling
	// them at every install would cost a scheduler restart for nothing.
	if recorded != "" {
		patch["spec"] = map[string]any{"template": map[string]any{"metadata": meta}}
		outcome = Rolled
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return "", fmt.Errorf("encoding the patch: %w", err)
	}
	if _, err := c.Client.AppsV1().Deployments(c.Namespace).Patch(ctx, c.Deployment, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return "", fmt.Errorf("patching Deployment %s/%s: %w", c.Namespace, c.Deployment, err)
	}
	return outcome, nil
}

// Run watches the one Secret and reconciles at each of its changes and every
// Resync, while leading, until ctx ends.
func Run(ctx context.Context, c Config) error {
	if err := c.Check(); err != nil {
		return err
	}
	resync := c.Resync
	if resync <= 0 {
		resync = DefaultResync
	}
	log := c.Log
	if log == nil {
		discard := logrus.New()
		discard.Out = bytes.NewBuffer(nil)
		log = discard
	}
	log = log.WithFields(logrus.Fields{"secret": c.Secret, "deployment": c.Deployment, "namespace": c.Namespace})

	// One object: a field selector keeps the watch to it, which is also
	// all that a Role limited by resourceNames allows.
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0,
		informers.WithNamespace(c.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", c.Secret).String()
		}))
	inf := factory.Core().V1().Secrets()
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
	}); err != nil {
		return fmt.Errorf("watching Secret %s/%s: %w", c.Namespace, c.Secret, err)
	}
	lister := inf.Lister().Secrets(c.Namespace)
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return ctx.Err()
	}

	tick := time.NewTicker(resync)
	defer tick.Stop()
	last := Outcome("")
	for {
		if c.Leading == nil || c.Leading() {
			secret, err := lister.Get(c.Secret)
			if err != nil && !apierrors.IsNotFound(err) {
				log.WithError(err).Warn("reading the client certificate Secret")
			}
			outcome, err := Reconcile(ctx, c, secret)
			switch {
			case err != nil:
				log.WithError(err).Warn("could not compare the client certificate with the scheduler's; retrying")
			case outcome == Rolled:
				log.Info("the scheduler's client certificate changed: rolling its Deployment so that it loads the new one")
			case outcome == Recorded:
				log.Info("recorded the scheduler's client certificate; its Deployment rolls when the certificate changes")
			case outcome == NoCertificate && last != NoCertificate:
				log.Warn("the client certificate Secret is missing or has no tls.crt yet")
			}
			last = outcome
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}
