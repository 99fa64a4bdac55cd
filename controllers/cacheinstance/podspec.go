package cacheinstance

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/cacheserver/control"
	"github.com/burstcache/burstcache/controllers/policy"
)

// Paths inside the server container.
const (
	cacheMountPath   = "/cache"
	scratchMountPath = "/scratch"
)

// buildServerPod returns the pod of server i of the instance in s, pinned to
// its node.
func buildServerPod(s *scope, i int, o Options) *corev1.Pod {
	inst, pool, srv := s.inst, s.pool, s.inst.Status.Servers[i]
	pod := &corev1.Pod{ObjectMeta: objectMeta(inst, podName(inst, i))}
	pod.Labels[cachev1alpha1.LabelServerIndex] = strconv.Itoa(i)
	// The image is the manager's own release, whose servers sign their
	// answers; the manager holds them to it (see serverProtocol).
	pod.Annotations = map[string]string{cachev1alpha1.AnnotationControlProtocol: control.CurrentProtocol.String()}
	pod.Finalizers = []string{cachev1alpha1.ServerProtectionFinalizer}
	pod.Spec = corev1.PodSpec{
		NodeSelector:       nodeSelector(pool, srv.Node),
		Tolerations:        tolerations(pool),
		Hostname:           pod.Name,
		Subdomain:          ServiceName(inst),
		SecurityContext:    podSecurityContext(inst.Spec.RunAs),
		InitContainers:     []corev1.Container{prepareContainer(inst, o)},
		Containers:         []corev1.Container{serverContainer(s, i, o)},
		Volumes:            volumes(inst, pool, i),
		ImagePullSecrets:   o.ServerImagePullSecrets,
		RestartPolicy:      corev1.RestartPolicyAlways,
		EnableServiceLinks: new(bool),
	}
	return pod
}

func nodeSelector(pool *cachev1alpha1.CachePool, node string) map[string]string {
	sel := map[string]string{corev1.LabelHostname: node}
	if pool.Spec.Nodes != nil {
		for k, v := range pool.Spec.Nodes.NodeSelector {
			sel[k] = v
		}
	}
	return sel
}

func tolerations(pool *cachev1alpha1.CachePool) []corev1.Toleration {
	if pool.Spec.Nodes == nil {
		return nil
	}
	return pool.Spec.Nodes.Tolerations
}

// podSecurityContext runs the server as spec.runAs, so that the backing
// file system is touched with the user's rights and no more.
func podSecurityContext(id cachev1alpha1.RunAs) *corev1.PodSecurityContext {
	uid, gid := id.UID, id.GID
	return &corev1.PodSecurityContext{
		RunAsUser: &uid, RunAsGroup: &gid, SupplementalGroups: id.SupplementalGroups,
		RunAsNonRoot: ptrTo(uid != 0),
	}
}

// prepareContainer creates the server's cache directory on the node and
// gives it to runAs: a host path is created owned by root, and the server
// itself runs as runAs.
func prepareContainer(inst *cachev1alpha1.CacheInstance, o Options) corev1.Container {
	root := int64(0)
	return corev1.Container{
		Name: "prepare-cache-dir", Image: o.ServerImage, ImagePullPolicy: o.ServerImagePullPolicy,
		Command: []string{"burstcache", "manager", "prepare-cache-dir", "--path=" + cacheMountPath,
			"--uid=" + strconv.FormatInt(inst.Spec.RunAs.UID, 10), "--gid=" + strconv.FormatInt(inst.Spec.RunAs.GID, 10)},
		SecurityContext: &corev1.SecurityContext{RunAsUser: &root, RunAsGroup: &root, RunAsNonRoot: ptrTo(false)},
		VolumeMounts:    []corev1.VolumeMount{{Name: "cache", MountPath: cacheMountPath}},
	}
}

// serverStartup is how long a server may take to start, recovery of its
// index included, before the kubelet restarts it.
const serverStartup = 15 * time.Minute

func serverContainer(s *scope, i int, o Options) corev1.Container {
	inst, pool := s.inst, s.pool
	return corev1.Container{
		Name: "server", Image: o.ServerImage, ImagePullPolicy: o.ServerImagePullPolicy,
		Command: []string{"burstcache", "server"},
		Args:    serverArgs(s, i, o),
		// A server that cannot start says why in its last log line, which
		// the reconciler shows in the ServersReady condition.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		Ports: []corev1.ContainerPort{
			{Name: "data", ContainerPort: DataPort, Protocol: corev1.ProtocolTCP},
			{Name: "control", ContainerPort: ControlPort, Protocol: corev1.ProtocolTCP},
		},
		// A server listens once it has recovered its index, which takes
		// longer the more extents it held. Until then only the startup
		// probe runs, for up to serverStartup: the liveness probe must not
		// restart a server in the middle of a long recovery, and a
		// readiness probe made before the server listens would fail, warn
		// about every new server, and leave it unready for a period.
		StartupProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("control")}},
			InitialDelaySeconds: 1, PeriodSeconds: 1, FailureThreshold: int32(serverStartup / time.Second),
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("control")}},
			PeriodSeconds: 5, FailureThreshold: 2,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("control")}},
			PeriodSeconds: 20, FailureThreshold: 3,
		},
		Resources:    corev1.ResourceRequirements{Requests: o.ServerRequests},
		VolumeMounts: volumeMounts(inst, pool),
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptrTo(false),
			Capabilities:             serverCapabilities(inst),
		},
	}
}

// serverCapabilities are none, except for a server acting as the caller.
func serverCapabilities(inst *cachev1alpha1.CacheInstance) *corev1.Capabilities {
	caps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if ActsAsCaller(inst) {
		caps.Add = callerCapabilities
	}
	return caps
}

// serverArgs are the flags of `burstcache server` for server i. The
// server is told the prefix its backing directory must stay beneath, so
// that a symbolic link in the backing path cannot lead it out of what the
// pool granted.
func serverArgs(s *scope, i int, o Options) []string {
	inst, pool, srv, servers := s.inst, s.pool, s.inst.Status.Servers[i], len(s.inst.Status.Servers)
	id := inst.Spec.RunAs
	args := []string{
		fmt.Sprintf("--listen=0.0.0.0:%d", DataPort),
		fmt.Sprintf("--control=0.0.0.0:%d", ControlPort),
		"--backing=" + backingDir(inst),
		"--cache-dir=" + cacheMountPath,
		"--capacity=" + strconv.FormatInt(srv.Capacity.Value(), 10),
		"--extent-size=" + strconv.FormatInt(extentSize(pool), 10),
		"--index=" + strconv.Itoa(i),
		"--servers=" + strconv.Itoa(servers),
		"--instance=" + inst.Namespace + "/" + inst.Name + "/" + string(inst.UID),
		"--uid=" + strconv.FormatInt(id.UID, 10),
		"--gid=" + strconv.FormatInt(id.GID, 10),
		"--secret-file=" + secretFile,
		// The manager calls the server with calls signed for its index
		// alone (control.ProtocolAddressed, as the pod's annotation says):
		// calls that name no server, which one seen on its way to another
		// server of the instance could be, are refused.
		"--refuse-unaddressed-calls",
	}
	if beneath := policy.BackingBeneath(inst, pool, s.nsLabels); beneath != "" {
		args = append(args, "--backing-beneath="+beneath)
	}
	if ActsAsCaller(inst) {
		uids, gids := policy.CallerIDs(inst, pool, s.nsLabels)
		args = append(args, "--act-as-caller", "--caller-uids="+joinRanges(uids), "--caller-gids="+joinRanges(gids))
		if o.MountPublicKey != "" {
			// The server believes the callers a client names: only
			// mounts of the node plugins may name them, not whoever can
			// read the instance's Secret.
			args = append(args, "--mount-public-key="+o.MountPublicKey)
		}
	}
	if len(id.SupplementalGroups) > 0 {
		args = append(args, "--groups="+joinInts(id.SupplementalGroups))
	}
	if inst.Spec.AccessMode != "" {
		// A LoadBalanced server holds whole files and refuses writes; the
		// mounts of the instance check that it says so.
		args = append(args, "--access-mode="+string(inst.Spec.AccessMode))
	}
	if inst.Spec.WriteBack != nil && inst.Spec.WriteBack.Durability != "" {
		args = append(args, "--durability="+string(inst.Spec.WriteBack.Durability))
	}
	return append(args, tunableArgs(Tunables(inst))...)
}

// backingDir is the directory the server caches, as mounted in its
// container: the backing file system is mounted at its mountPath, so it is
// spec.backing.path itself.
func backingDir(inst *cachev1alpha1.CacheInstance) string {
	if inst.Spec.Backing == nil {
		return scratchMountPath
	}
	return path.Clean(string(inst.Spec.Backing.Path))
}

func extentSize(pool *cachev1alpha1.CachePool) int64 {
	if pool.Spec.ExtentSize == nil {
		return 1 << 20
	}
	return pool.Spec.ExtentSize.Value()
}

// ActsAsCaller reports whether the instance's servers act as each calling
// process: a server running as root (which only a rule with allowRoot
// grants) is a shared, multi-user cache, in which every caller keeps its
// own permissions.
func ActsAsCaller(inst *cachev1alpha1.CacheInstance) bool { return inst.Spec.RunAs.UID == 0 }

// callerCapabilities are what a server acting as the caller needs: to take
// the caller's ids (SETUID, SETGID), and to pass on the file-system
// capabilities a caller holds, so that the backing file system grants the
// caller what it would grant it directly. A caller without them gets none.
var callerCapabilities = []corev1.Capability{
	"SETUID", "SETGID", "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "MKNOD",
}

func joinRanges(rs []cachev1alpha1.IDRange) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = strconv.FormatInt(r.Min, 10) + "-" + strconv.FormatInt(r.Max, 10)
	}
	return strings.Join(s, ",")
}

func joinInts(ns []int64) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, ",")
}

func ptrTo[T any](v T) *T { return &v }
