package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/test/apiserver"
)

// cluster is what a measurement runs against.
type cluster struct {
	env        *envtest.Environment
	cfg        *rest.Config
	c          client.Client
	dir        string
	kubeconfig string
	control    string
	procs      []*exec.Cmd
	manager    *exec.Cmd
	stopBinder context.CancelFunc
}

var scheme = runtime.NewScheme()

func init() {
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
}

// startCluster starts the API server, one real cache server, kwok, the
// manager and the binder, then creates the nodes and the pool.
func startCluster(ctx context.Context, c config) (_ *cluster, err error) {
	cl := &cluster{}
	defer func() {
		if err != nil {
			cl.dumpLogs()
			cl.stop()
		}
	}()
	if cl.dir, err = os.MkdirTemp("", "burstcache-scale-"); err != nil {
		return nil, err
	}
	steps := []func(context.Context, config) error{cl.startAPI, cl.startServer, cl.startKwok, cl.startManager, cl.startBinder, cl.createNodes}
	for _, step := range steps {
		if err := step(ctx, c); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

func (cl *cluster) startAPI(_ context.Context, c config) error {
	var err error
	if cl.env, cl.cfg, err = apiserver.Start(apiserver.Options{CRDs: true, Assets: c.assets}); err != nil {
		return err
	}
	if cl.c, err = client.New(cl.cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	admin, err := cl.env.AddUser(envtest.User{Name: "scale-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		return err
	}
	cl.kubeconfig = filepath.Join(cl.dir, "kubeconfig")
	return os.WriteFile(cl.kubeconfig, kc, 0o600)
}

// startServer runs the real cache server that answers the control calls of
// every simulated server pod.
func (cl *cluster) startServer(ctx context.Context, c config) error {
	for _, d := range []string{"backing", "cache"} {
		if err := os.Mkdir(filepath.Join(cl.dir, d), 0o755); err != nil {
			return err
		}
	}
	ready := filepath.Join(cl.dir, "server.ready")
	cmd := exec.CommandContext(ctx, c.bin, "server", "--listen=127.0.0.1:0", "--control=127.0.0.1:0",
		"--backing="+filepath.Join(cl.dir, "backing"), "--cache-dir="+filepath.Join(cl.dir, "cache"),
		"--capacity=64Mi", "--ready-file="+ready)
	if err := cl.spawn(cmd, "server.log"); err != nil {
		return err
	}
	var addrs struct{ Control string }
	if err := waitFor(30*time.Second, func() bool {
		data, err := os.ReadFile(ready)
		return err == nil && json.Unmarshal(data, &addrs) == nil && addrs.Control != ""
	}); err != nil {
		return fmt.Errorf("cache server never wrote %s: %w", ready, err)
	}
	cl.control = addrs.Control
	return nil
}

func (cl *cluster) startKwok(ctx context.Context, c config) error {
	stages := c.kwokStages
	if stages == "" {
		var err error
		if stages, err = kwokStages(); err != nil {
			return err
		}
	}
	args := []string{"--kubeconfig=" + cl.kubeconfig, "--manage-all-nodes=true", "--node-lease-duration-seconds=0"}
	for _, s := range []string{"node/fast", "pod/fast"} {
		files, err := filepath.Glob(filepath.Join(stages, s, "*.yaml"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no kwok stages in %s", filepath.Join(stages, s))
		}
		for _, f := range files {
			args = append(args, "--config="+f)
		}
	}
	return cl.spawn(exec.CommandContext(ctx, c.kwok, args...), "kwok.log")
}

// kwokStages finds kwok's stage YAMLs in the Go module cache, where
// `hack/tool.sh kwok` left its module source.
func kwokStages() (string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dirs, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "sigs.k8s.io", "kwok@*", "kustomize", "stage"))
	if len(dirs) == 0 {
		return "", errors.New("kwok's module source is not in the Go module cache: run hack/tool.sh kwok, or pass -kwok-stages")
	}
	return dirs[len(dirs)-1], nil
}

func (cl *cluster) startManager(ctx context.Context, _ config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), managerEnv+"="+cl.kubeconfig, controlEnv+"="+cl.control)
	if err := cl.spawn(cmd, "manager.log"); err != nil {
		return err
	}
	cl.manager = cmd
	return nil
}

func (cl *cluster) spawn(cmd *exec.Cmd, logName string) error {
	f, err := os.Create(filepath.Join(cl.dir, logName))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	cl.procs = append(cl.procs, cmd)
	return nil
}

func (cl *cluster) createNodes(ctx context.Context, c config) error {
	for i := range c.nodes {
		name := "ssd-" + strconv.Itoa(i)
		node := &corev1.Node{}
		node.Name = name
		node.Labels = map[string]string{corev1.LabelHostname: name, "node.burstcache.io/nvme": "true", "type": "kwok"}
		node.Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
		if err := cl.c.Create(ctx, node); err != nil {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
		// The API server taints new nodes not-ready; without a
		// controller-manager here, nothing would lift the taint once kwok
		// reports the node Ready, so the harness does.
		untaint := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":null}}`))
		if err := cl.c.Patch(ctx, node, untaint); err != nil {
			return fmt.Errorf("untainting node %s: %w", name, err)
		}
	}
	if err := cl.c.Create(ctx, pool()); err != nil {
		return err
	}
	var p cachev1alpha1.CachePool
	err := waitFor(2*time.Minute, func() bool {
		return cl.c.Get(ctx, client.ObjectKey{Name: poolName}, &p) == nil && len(p.Status.Nodes) == c.nodes
	})
	if err != nil {
		return fmt.Errorf("the pool found %d of %d nodes (conditions %v): %w", len(p.Status.Nodes), c.nodes, p.Status.Conditions, err)
	}
	return nil
}

// dumpLogs prints the end of every process's log, to say why a
// measurement failed.
func (cl *cluster) dumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(cl.dir, "*.log"))
	for _, f := range logs {
		data, _ := os.ReadFile(f)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		log.Printf("--- last lines of %s:\n%s", filepath.Base(f), strings.Join(lines[max(0, len(lines)-15):], "\n"))
	}
}

func (cl *cluster) stop() {
	if cl.stopBinder != nil {
		cl.stopBinder()
	}
	for i := len(cl.procs) - 1; i >= 0; i-- {
		_ = cl.procs[i].Process.Signal(syscall.SIGTERM)
		_ = cl.procs[i].Wait()
	}
	if cl.env != nil {
		_ = cl.env.Stop()
	}
	if cl.dir != "" {
		_ = os.RemoveAll(cl.dir)
	}
}

func waitFor(timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok() {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("not done after %s", timeout)
}
