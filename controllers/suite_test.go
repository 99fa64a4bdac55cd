package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/controllers"
	"github.com/burstcache/burstcache/controllers/cacheinstance"
	"github.com/burstcache/burstcache/test/apiserver"
	"github.com/burstcache/burstcache/test/kubelet"
	"github.com/burstcache/burstcache/test/repo"
)

// The suite runs the whole operator, controllers and webhooks, in a manager
// against a real kube-apiserver and etcd (built by hack/envtest.sh). envtest
// has no scheduler and no kubelet: the tests play the kubelet themselves
// (test/kubelet), running real `burstcache server` processes on loopback
// for the pods the operator creates, and the reconciler reaches them through
// a resolver that the fake kubelet fills in.

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
	ctx       context.Context
	cancel    context.CancelFunc
	repoRoot  string
	bin       string
	kl        *kubelet.Kubelet
	stopMgr   func()
	stopKCM   func()
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	ctrl.SetLogger(GinkgoLogr)
	var err error
	repoRoot, err = repo.Root()
	Expect(err).NotTo(HaveOccurred())
	bin = kubelet.Binary(repoRoot)

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	testEnv, cfg, err = apiserver.Start(apiserver.Options{CRDs: true, Webhooks: true})
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	kl = kubelet.New(GinkgoT().TempDir(), bin, k8sClient)
	kl.RegisterNodes(ctx, "node-a", "node-b", "node-c")
	stopKCM = startControllerManager(testEnv.BinaryAssetsDirectory)
	stopMgr = startManager()
})

var _ = AfterSuite(func() {
	if stopMgr != nil {
		stopMgr()
	}
	if stopKCM != nil {
		stopKCM()
	}
	if kl != nil {
		kl.StopAll()
	}
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// startManager runs the operator as `burstcache manager` does, and returns a
// function that stops it and waits until it stopped.
func startManager() func() {
	wo := testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		}),
		Controller: suiteControllerOptions(),
		// A manager stopped by a spec may be in the middle of a flush or a
		// hint (up to 10 s each here) while other suites load the machine.
		GracefulShutdownTimeout: ptr(2 * time.Minute),
	})
	Expect(err).NotTo(HaveOccurred())
	mctx, mcancel := context.WithCancel(ctx)
	Expect(controllers.Setup(mctx, mgr, controllers.Options{
		Webhooks:       true,
		MountKeySecret: suiteMountKey,
		Instance: cacheinstance.Options{
			Resolver: kl.Resolve, StatsInterval: time.Second,
			FlushAttemptTimeout: 10 * time.Second, CallTimeout: 3 * time.Second,
			RequestAttemptTimeout: 10 * time.Second,
			// The pull policy is left to its default, which the server pods
			// must carry all the same (see podspec_test.go).
			ServerImagePullSecrets: []corev1.LocalObjectReference{{Name: suitePullSecret}},
		},
	})).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	Expect(apiserver.WaitForWebhooks(ctx, wo)).To(Succeed())
	return func() {
		mcancel()
		Eventually(done, 30*time.Second).Should(BeClosed())
	}
}

// suitePullSecret is the pull Secret the suite's manager gives server pods.
const suitePullSecret = "regcred"

// suiteMountKey is the Secret of the suite's mount key, which its manager
// makes.
var suiteMountKey = client.ObjectKey{Namespace: "default", Name: cachev1alpha1.MountKeySecretName}

func ptr[T any](v T) *T { return &v }

// suiteControllerOptions are the operator's controller settings, with name
// validation off: the suite starts managers again in one process, as a
// restart.
func suiteControllerOptions() config.Controller {
	c := controllers.ControllerOptions()
	c.SkipNameValidation = ptr(true)
	return c
}
