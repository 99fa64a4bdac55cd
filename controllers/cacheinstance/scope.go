package cacheinstance

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/policy"
)

// scope is what one pass observed of the world and decided. Phase functions
// fill it in; the condition functions read it.
type scope struct {
	// inst is the instance being reconciled; its status is written at the
	// end of the pass. original is the instance as fetched, for the patch
	// and for telling transitions.
	inst, original *cachev1alpha1.CacheInstance

	// pool is the instance's pool, nil if it does not exist.
	pool *cachev1alpha1.CachePool
	// nsLabels are the labels of the instance's namespace.
	nsLabels map[string]string
	// nodes are the names of the nodes that match the pool.
	nodes []string

	// rejected holds the pool rules the instance breaks.
	rejected *policy.Error
	// noCapacity holds why the instance waits for capacity.
	noCapacity policy.Violations

	// pods are the server pods by server index.
	pods map[int]*corev1.Pod
	// claims are the cache claims by server index, when the pool's media
	// is a StorageClass.
	claims map[int]*corev1.PersistentVolumeClaim
	// stats are the answers of the servers that answered, by index.
	stats map[int]control.Stats

	// preloadErr is why the preload failed in this pass.
	preloadErr error
	// requeueAfter, when set, is how soon a phase that lets the pass go on
	// wants the next pass, to poll work running in the background.
	requeueAfter time.Duration

	// createErr is why a server object could not be created in this pass.
	createErr error
	// podsChecked says that this pass compared the server pods with the
	// pods the manager makes now; outdated are those that differ, and how.
	podsChecked bool
	outdated    []string

	// flushErr is why the teardown write-back failed in this pass.
	flushErr error
	// mountLeases are the names of the instance's mount Leases, by node.
	mountLeases map[string]string
	// unreadyMount is a mount that holds the teardown from a node that is
	// not Ready or is gone, which may never unmount.
	unreadyMount *cachev1alpha1.Mount
	// gone is set once the finalizer is removed: there is no status to
	// write any more.
	gone bool
	// confirmedLive is set once this pass read the instance from the API
	// server and found it neither gone nor being deleted (mayCreate).
	confirmedLive bool
}

func newScope(inst *cachev1alpha1.CacheInstance) *scope {
	return &scope{
		inst:     inst,
		original: inst.DeepCopy(),
		pods:     map[int]*corev1.Pod{},
		claims:   map[int]*corev1.PersistentVolumeClaim{},
		stats:    map[int]control.Stats{},
	}
}

// requeueWithin asks for the next pass within d.
func (s *scope) requeueWithin(d time.Duration) {
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

// readyServers counts the servers whose pod is ready.
func (s *scope) readyServers() int {
	n := 0
	for _, srv := range s.inst.Status.Servers {
		if srv.Ready {
			n++
		}
	}
	return n
}

// allServersReady reports whether the instance has servers and all are
// ready.
func (s *scope) allServersReady() bool {
	n := len(s.inst.Status.Servers)
	return n > 0 && s.readyServers() == n
}

// notReadyMessage says how many servers are ready, and why the others are
// not when this pass knows: a server object it could not create, or a
// server that exited.
func (s *scope) notReadyMessage() string {
	msg := fmt.Sprintf("%d of %d servers ready", s.readyServers(), len(s.inst.Status.Servers))
	if s.createErr != nil {
		return msg + ": " + s.createErr.Error()
	}
	return msg + s.serverFailure()
}

// serverFailure returns ": <server> exited: <reason>" for the first server
// that is not ready and whose container last exited with a message (its
// termination message, or the end of its log), or "".
func (s *scope) serverFailure() string {
	for i, srv := range s.inst.Status.Servers {
		if srv.Ready || s.pods[i] == nil {
			continue
		}
		for _, c := range s.pods[i].Status.ContainerStatuses {
			if t := c.LastTerminationState.Terminated; t != nil && strings.TrimSpace(t.Message) != "" {
				return fmt.Sprintf(": %s exited: %s", srv.Name, strings.TrimSpace(t.Message))
			}
		}
	}
	return ""
}
