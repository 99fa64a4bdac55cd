package sanity_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// The suite runs the operator, controllers and webhooks, in a manager
// against a real kube-apiserver and etcd; test/kubelet runs the server pods
// it creates as real processes on loopback. envtest has no scheduler: the
// operator places server pods on the suite's nodes itself.

var (
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()
	ctx       context.Context
	cancel    context.CancelFunc
	bin       string
	kl        *kubelet.Kubelet
)

func TestSanity(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "csi-sanity Suite")
}

var _ = BeforeSuite(func() {
	ctx, cancel = context.WithCancel(context.Background())
	ctrl.SetLogger(GinkgoLogr)
	root, err := repo.Root()
	Expect(err).NotTo(HaveOccurred())
	bin = kubelet.Binary(root)

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(cachev1alpha1.AddToScheme(scheme)).To(Succeed())
	testEnv, cfg, err = apiserver.Start(apiserver.Options{CRDs: true, Webhooks: true})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(testEnv.Stop()).To(Succeed()) })
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	kl = kubelet.New(GinkgoT().TempDir(), bin, k8sClient)
	kctx, kcancel := context.WithCancel(ctx)
	kdone := make(chan struct{})
	go func() { defer close(kdone); kl.Run(kctx, 100*time.Millisecond) }()
	DeferCleanup(func() { kcancel(); <-kdone; kl.StopAll() })
	kl.RegisterNodes(ctx, "node-a", "node-b", "node-c")
	startManager()
})

var _ = AfterSuite(func() { cancel() })

// startManager runs the operator as `burstcache manager --disable-provisioner`
// does, the external-provisioner's part being csi-sanity's.
func startManager() {
	wo := testEnv.WebhookInstallOptions
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  controllers.CacheOptions(),
		Controller:             controllers.ControllerOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: wo.LocalServingCertDir,
		}),
	})
	Expect(err).NotTo(HaveOccurred())
	mctx, mcancel := context.WithCancel(ctx)
	Expect(controllers.Setup(mctx, mgr, controllers.Options{
		Webhooks: true, DisableProvisioner: true,
		Instance: cacheinstance.Options{
			Resolver: kl.Resolve, StatsInterval: time.Second,
			FlushAttemptTimeout: 10 * time.Second, CallTimeout: 3 * time.Second,
			RequestAttemptTimeout: 10 * time.Second,
		},
	})).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	DeferCleanup(func() { mcancel(); Eventually(done, 30*time.Second).Should(BeClosed()) })
	Expect(apiserver.WaitForWebhooks(ctx, wo)).To(Succeed())
}
