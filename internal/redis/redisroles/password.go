package redisroles

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkSharedPassword refuses a shared password that could reach any
// namespace, or travel where anyone on the path can read it.
func checkSharedPassword(cfg Config) error {
	switch {
	case cfg.PasswordFile == "":
		return nil
	case len(cfg.PasswordNamespaces) == 0:
		return errors.New("a shared Redis password (--redis-password-file) needs the namespaces it may be sent to (--redis-password-namespaces); without them any pod labelled like Redis would receive it")
	case cfg.PasswordInsecure:
		return nil
	case cfg.TLS == nil:
		return errors.New("a shared Redis password (--redis-password-file) goes only over TLS (--redis-tls) that verifies the server, unless --redis-password-insecure")
	case cfg.TLS.InsecureSkipVerify:
		return errors.New("a shared Redis password (--redis-password-file) goes only over TLS that verifies the server (not --redis-tls-insecure-skip-verify), unless --redis-password-insecure")
	}
	return nil
}

// password is --redis-password-file's for the pods of its namespaces (for
// the default user), else the pod's own password and the user it belongs
// to.
func (c *Controller) password(ctx context.Context, info *podInfo) (user, password string, err error) {
	if c.cfg.PasswordFile != "" && slices.Contains(c.cfg.PasswordNamespaces, info.Namespace) {
		b, err := os.ReadFile(c.cfg.PasswordFile)
		if err != nil {
			return "", "", err
		}
		return "", strings.TrimRight(string(b), "\r\n"), nil
	}
	ref := info.Password
	switch {
	case ref.Value != "":
		return ref.User, ref.Value, nil
	case ref.Secret == "":
		return "", "", nil
	case !c.cfg.PodSecrets:
		return "", "", fmt.Errorf("the pod's REDIS_PASSWORD comes from Secret %s, which regosched may not read (--redis-pod-secrets)", ref.Secret)
	}
	s, err := c.cfg.Client.CoreV1().Secrets(info.Namespace).Get(ctx, ref.Secret, metav1.GetOptions{})
	if err != nil {
		return "", "", fmt.Errorf("reading secret %s: %w", ref.Secret, err)
	}
	v, ok := s.Data[ref.SecretKey]
	if !ok {
		return "", "", fmt.Errorf("secret %s has no key %q", ref.Secret, ref.SecretKey)
	}
	return ref.User, strings.TrimRight(string(v), "\r\n"), nil
}
