package controllers_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// kcmControllers are the kube-controller-manager controllers the
// provisioning contract relies on: binding claims to provisioned PVs and
// releasing them, lifting the protection finalizers of claims and PVs no
// pod uses, and creating the claims of generic ephemeral volumes. The
// garbage collector is left out: the other specs assume there is none.
const kcmControllers = "persistentvolume-binder-controller,persistentvolumeclaim-protection-controller," +
	"persistentvolume-protection-controller,ephemeral-volume-controller"

// kcm reports whether a real kube-controller-manager runs in the suite.
// hack/k8s-binaries.sh builds one (`hack/k8s-binaries.sh
// kube-controller-manager`, 10-20 minutes cold); without it, the specs
// play the parts of those controllers they need (see claims_test.go).
var kcm bool

// startControllerManager runs kube-controller-manager from the assets
// directory, if it is there, against the suite's API server, and returns a
// function that stops it.
func startControllerManager(assets string) func() {
	GinkgoHelper()
	path := filepath.Join(assets, "kube-controller-manager")
	if _, err := os.Stat(path); err != nil {
		GinkgoWriter.Println("No kube-controller-manager in", assets, "- the specs play the PV controller's part")
		return func() {}
	}
	user, err := testEnv.AddUser(envtest.User{Name: "kube-controller-manager", Groups: []string{"system:masters"}}, cfg)
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(kc, kubeconfig, 0o600)).To(Succeed())
	cmd := exec.Command(path, "--kubeconfig="+kc, "--controllers="+kcmControllers,
		"--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
		"--concurrent-ephemeralvolume-syncs=2", "--pvclaimbinder-sync-period=1s")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	Expect(cmd.Start()).To(Succeed())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	Consistently(done, 2*time.Second).ShouldNot(BeClosed(), "kube-controller-manager exited: %s", &log)
	kcm = true
	GinkgoWriter.Println("Running kube-controller-manager with", kcmControllers)
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
}
