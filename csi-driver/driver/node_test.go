package driver_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
	"github.com/burstcache/burstcache/csi-driver/mounter"
)

var _ = Describe("Node service", func() {
	var w *world

	BeforeEach(func() { w = newWorld() })

	It("stages, publishes, serves reads and writes, and releases every byte", func() {
		p := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		Expect(w.lease()).To(BeNil())

		By("staging twice")
		for range 2 {
			_, err := p.node.NodeStageVolume(ctx, stageReq(w))
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(isMounted(w.staging)).To(BeTrue())
		Expect(w.leasePods()).To(BeEmpty())
		fi, err := os.Stat(filepath.Join(w.volumeDir(), mounter.SecretFile))
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o600)))
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", w.daemonPID()))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(cmdline)).NotTo(ContainSubstring(secret))

		By("publishing twice and writing through the target")
		for range 2 {
			_, err := p.node.NodePublishVolume(ctx, publishReq(w, "pod-a"))
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(w.leasePods()).To(Equal("pod-a/pvc-1"))
		data := pattern(3<<20+123, 1)
		Expect(os.WriteFile(filepath.Join(w.target("pod-a"), "out.bin"), data, 0o644)).To(Succeed())
		Expect(os.ReadFile(filepath.Join(w.target("pod-a"), "out.bin"))).To(Equal(data))
		Expect(os.MkdirAll(filepath.Join(w.target("pod-a"), "sub", "dir"), 0o755)).To(Succeed())

		By("publishing read-only, by flag and by access mode")
		ro := publishReq(w, "pod-ro")
		ro.Readonly = true
		reader := publishReq(w, "pod-reader")
		reader.VolumeCapability = mountCapability(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY)
		for _, req := range []*csi.NodePublishVolumeRequest{ro, ro, reader} {
			_, err := p.node.NodePublishVolume(ctx, req)
			Expect(err).NotTo(HaveOccurred())
		}
		for _, pod := range []string{"pod-ro", "pod-reader"} {
			err := os.WriteFile(filepath.Join(w.target(pod), "x"), []byte("no"), 0o644)
			Expect(errors.Is(err, syscall.EROFS)).To(BeTrue(), "writing through %s: %v", pod, err)
			Expect(os.ReadFile(filepath.Join(w.target(pod), "out.bin"))).To(Equal(data))
		}
		Expect(os.WriteFile(filepath.Join(w.target("pod-a"), "still-writable"), []byte("yes"), 0o644)).To(Succeed())

		By("publishing a sub-path, and refusing ones that leave the instance")
		_, err = p.node.NodePublishVolume(ctx, publishReq(w, "pod-sub", "subPath", "sub/"))
		Expect(err).NotTo(HaveOccurred())
		Expect(filepath.Join(w.target("pod-sub"), "dir")).To(BeADirectory())
		Expect(os.Symlink("/etc", filepath.Join(w.target("pod-a"), "escape"))).To(Succeed())
		for _, sub := range []string{"..", "sub/../../x", "/etc", "escape", "missing"} {
			Expect(codeOf(p.node.NodePublishVolume(ctx, publishReq(w, "pod-bad", "subPath", sub)))).
				To(Equal(codes.InvalidArgument), "subPath %q", sub)
		}
		Expect(isMounted(w.target("pod-bad"))).To(BeFalse())
		Expect(samePods(w.leasePods(), "pod-a/pvc-1", "pod-ro/pvc-1", "pod-reader/pvc-1", "pod-sub/pvc-1")).To(BeTrue(), w.leasePods())

		By("refusing to unstage while published, then unpublishing twice")
		Expect(codeOf(p.node.NodeUnstageVolume(ctx, unstageReq(w)))).To(Equal(codes.FailedPrecondition))
		for _, pod := range []string{"pod-a", "pod-ro", "pod-reader", "pod-sub", "pod-a"} {
			_, err := p.node.NodeUnpublishVolume(ctx, unpublishReq(w, pod))
			Expect(err).NotTo(HaveOccurred())
			Expect(isMounted(w.target(pod))).To(BeFalse())
		}
		Expect(w.leasePods()).To(BeEmpty())

		By("unstaging twice")
		for range 2 {
			_, err := p.node.NodeUnstageVolume(ctx, unstageReq(w))
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(isMounted(w.staging)).To(BeFalse())
		Expect(w.lease()).To(BeNil())
		Expect(w.volumeDir()).NotTo(BeADirectory())

		flushServers(servers)
		Expect(os.ReadFile(filepath.Join(backing, "out.bin"))).To(Equal(data))
		Expect(os.ReadFile(filepath.Join(backing, "still-writable"))).To(Equal([]byte("yes")))
		Expect(filepath.Join(backing, "x")).NotTo(BeAnExistingFile())
	})

	It("mounts with the node's page cache only when the instance asks for it", func() {
		p := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		for _, on := range []bool{false, true} {
			w.setClientCache(on)
			_, err := p.node.NodeStageVolume(ctx, stageReq(w))
			Expect(err).NotTo(HaveOccurred())
			Expect(slices.Contains(w.daemonArgs(), "--client-cache")).To(Equal(on), "daemon arguments %q", w.daemonArgs())
			_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
			Expect(err).NotTo(HaveOccurred())
		}
		w.setClientCache(false)
	})

	It("refuses a stage without the data secret or of an unknown instance", func() {
		p := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		req := stageReq(w)
		req.Secrets = nil
		Expect(codeOf(p.node.NodeStageVolume(ctx, req))).To(Equal(codes.InvalidArgument))
		req = stageReq(w)
		req.VolumeId = namespace + "/missing"
		Expect(codeOf(p.node.NodeStageVolume(ctx, req))).To(Equal(codes.NotFound))
		req.VolumeId = "not-an-id"
		Expect(codeOf(p.node.NodeStageVolume(ctx, req))).To(Equal(codes.InvalidArgument))
		Expect(isMounted(w.staging)).To(BeFalse())
		Expect(w.lease()).To(BeNil())
	})

	It("publishes an instance only into pods of its own namespace", func() {
		p := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		_, err := p.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			_, _ = p.node.NodeUnpublishVolume(ctx, unpublishReq(w, "intruder"))
			_, _ = p.node.NodeUnpublishVolume(ctx, unpublishReq(w, "pod-a"))
			_, _ = p.node.NodeUnstageVolume(ctx, unstageReq(w))
		})

		By("refusing a pod of another namespace, whose claim bound a volume of this instance")
		err = errOf(p.node.NodePublishVolume(ctx, publishReq(w, "intruder", "csi.storage.k8s.io/pod.namespace", "team-b")))
		Expect(status.Code(err)).To(Equal(codes.InvalidArgument), "published into another namespace: %v", err)
		Expect(err.Error()).To(ContainSubstring("team-b"))
		Expect(isMounted(w.target("intruder"))).To(BeFalse())
		Expect(w.leasePods()).To(BeEmpty())

		By("publishing into a pod of the instance's namespace")
		_, err = p.node.NodePublishVolume(ctx, publishReq(w, "pod-a", "csi.storage.k8s.io/pod.namespace", namespace))
		Expect(err).NotTo(HaveOccurred())
		Expect(isMounted(w.target("pod-a"))).To(BeTrue())
	})

	It("admits no mount of an instance being deleted, though its phase still says Ready", func() {
		w := newWorld()
		w.instance = "doomed"
		createInstance(w.instance, servers)
		ci := &cachev1alpha1.CacheInstance{}
		key := client.ObjectKey{Namespace: namespace, Name: w.instance}
		Expect(k8sClient.Get(ctx, key, ci)).To(Succeed())
		controllerutil.AddFinalizer(ci, cachev1alpha1.Finalizer)
		Expect(k8sClient.Update(ctx, ci)).To(Succeed())
		DeferCleanup(func() {
			cur := &cachev1alpha1.CacheInstance{}
			if k8sClient.Get(ctx, key, cur) == nil {
				controllerutil.RemoveFinalizer(cur, cachev1alpha1.Finalizer)
				_ = k8sClient.Update(ctx, cur)
			}
		})
		// The user deletes it; the operator (busy, or restarting) has not
		// moved its phase to Flushing yet.
		Expect(k8sClient.Delete(ctx, ci)).To(Succeed())
		Expect(k8sClient.Get(ctx, key, ci)).To(Succeed())
		Expect(ci.DeletionTimestamp).NotTo(BeNil())
		Expect(ci.Status.Phase).To(Equal(cachev1alpha1.PhaseReady))

		p := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		_, err := p.node.NodeStageVolume(ctx, stageReq(w))
		if err == nil {
			DeferCleanup(func() { _, _ = p.node.NodeUnstageVolume(ctx, unstageReq(w)) })
		}
		Expect(codeOf(nil, err)).To(Equal(codes.Unavailable), "a new mount was admitted into the instance's teardown")
		Expect(err.Error()).To(ContainSubstring("being deleted"))
		Expect(isMounted(w.staging)).To(BeFalse())
		Expect(w.lease()).To(BeNil())
	})

	It("logs every call without the data secret", func() {
		var mu sync.Mutex
		var logs strings.Builder
		log := funcr.New(func(prefix, args string) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintln(&logs, prefix, args)
		}, funcr.Options{Verbosity: 5})
		p := startPluginLogging(w, &mounter.Process{Binary: bin}, time.Hour, log)
		_, err := p.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(err).NotTo(HaveOccurred())
		mu.Lock()
		defer mu.Unlock()
		Expect(logs.String()).To(ContainSubstring("NodeStageVolume"))
		Expect(logs.String()).To(ContainSubstring("***stripped***"))
		Expect(logs.String()).NotTo(ContainSubstring(secret))
	})

	It("answers Aborted to calls for a volume another call is working on", func() {
		g := newGatedMounter(&mounter.Process{Binary: bin})
		p := startPlugin(w, g, time.Hour)
		done := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			_, err := p.node.NodeStageVolume(ctx, stageReq(w))
			done <- err
		}()
		Eventually(g.entered, 10*time.Second).Should(Receive())
		Expect(codeOf(p.node.NodeStageVolume(ctx, stageReq(w)))).To(Equal(codes.Aborted))
		Expect(codeOf(p.node.NodePublishVolume(ctx, publishReq(w, "pod-a")))).To(Equal(codes.Aborted))
		Expect(codeOf(p.node.NodeUnstageVolume(ctx, unstageReq(w)))).To(Equal(codes.Aborted))
		g.gate <- struct{}{}
		Expect(<-done).To(Succeed())

		_, err := p.node.NodePublishVolume(ctx, publishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		_, err = p.node.NodeUnpublishVolume(ctx, unpublishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(err).NotTo(HaveOccurred())
	})

	It("keeps a live mount serving while the plugin process is killed and replaced", func() {
		sock := filepath.Join(GinkgoT().TempDir(), "csi.sock")
		p1, cmd1 := startPluginProcess(w, sock)
		_, err := p1.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		_, err = p1.node.NodePublishVolume(ctx, publishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		target := w.target("pod-a")

		io := startIO(target)
		time.Sleep(300 * time.Millisecond)
		By("killing the plugin")
		Expect(cmd1.Process.Kill()).To(Succeed())
		_ = cmd1.Wait()
		p1.stop()
		time.Sleep(500 * time.Millisecond)
		Expect(w.lease()).NotTo(BeNil(), "the Lease must outlive the plugin while the volume is staged")

		By("starting a new plugin on the same state directory")
		p2, _ := startPluginProcess(w, sock)
		defer p2.stop()
		time.Sleep(300 * time.Millisecond)
		files := io.stop()
		Expect(files).To(BeNumerically(">", 3), "reads and writes must go on during the restart")

		stats, err := p2.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: w.id(), VolumePath: target})
		Expect(err).NotTo(HaveOccurred())
		Expect(stats.GetVolumeCondition().GetAbnormal()).To(BeFalse(), stats.GetVolumeCondition().GetMessage())
		after := pattern(1<<20, 9)
		Expect(os.WriteFile(filepath.Join(target, "after.bin"), after, 0o644)).To(Succeed())

		By("unpublishing and unstaging with the new plugin")
		_, err = p2.node.NodeUnpublishVolume(ctx, unpublishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		_, err = p2.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(err).NotTo(HaveOccurred())
		Expect(isMounted(w.staging)).To(BeFalse())
		Expect(w.lease()).To(BeNil())

		flushServers(servers)
		Expect(os.ReadFile(filepath.Join(backing, "after.bin"))).To(Equal(after))
		for i := range files {
			Expect(os.ReadFile(filepath.Join(backing, ioName(i)))).To(Equal(ioData(i)), ioName(i))
		}
	})

	It("remounts, when it starts, a mount whose daemon died while no plugin ran", func() {
		p1 := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		_, err := p1.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		_, err = p1.node.NodePublishVolume(ctx, publishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		p1.stop()
		Expect(syscall.Kill(w.daemonPID(), syscall.SIGKILL)).To(Succeed())

		p2 := startPlugin(w, &mounter.Process{Binary: bin}, 200*time.Millisecond)
		target := w.target("pod-a")
		Eventually(func(g Gomega) {
			stats, err := p2.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: w.id(), VolumePath: target})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stats.GetVolumeCondition().GetAbnormal()).To(BeFalse(), stats.GetVolumeCondition().GetMessage())
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		data := pattern(1<<20, 11)
		Expect(os.WriteFile(filepath.Join(target, "after-restart.bin"), data, 0o644)).To(Succeed())
		Expect(os.ReadFile(filepath.Join(w.staging, "after-restart.bin"))).To(Equal(data))
		Expect(w.leasePods()).To(Equal("pod-a/pvc-1"))

		_, err = p2.node.NodeUnpublishVolume(ctx, unpublishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		_, err = p2.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(err).NotTo(HaveOccurred())
		Expect(w.lease()).To(BeNil())
	})

	It("loses nothing the client had not published when it unstages", func() {
		p := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		_, err := p.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		_, err = p.node.NodePublishVolume(ctx, publishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())

		// A write past the end grows the file. The client makes the new size
		// durable on the servers a second after the write (its background
		// pusher), at fsync, or when it unmounts; the unstage below comes
		// well before that second is over, so the unmount must do it.
		path := filepath.Join(w.target("pod-a"), "grown.bin")
		head, tail := pattern(4096, 3), pattern(777, 4)
		Expect(os.WriteFile(path, head, 0o644)).To(Succeed())
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		Expect(err).NotTo(HaveOccurred())
		_, err = f.WriteAt(tail, 5<<20+7)
		Expect(err).NotTo(HaveOccurred())
		grown := time.Now()
		Expect(f.Close()).To(Succeed())

		_, err = p.node.NodeUnpublishVolume(ctx, unpublishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		Expect(time.Since(grown)).To(BeNumerically("<", 900*time.Millisecond),
			"the client may have published the size before the unstage; the spec would prove nothing")
		_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(err).NotTo(HaveOccurred())

		flushServers(servers)
		want := make([]byte, 5<<20+7+len(tail))
		copy(want, head)
		copy(want[5<<20+7:], tail)
		got, err := os.ReadFile(filepath.Join(backing, "grown.bin"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(got)).To(Equal(len(want)))
		Expect(bytes.Equal(got, want)).To(BeTrue())
	})

	It("reports a killed FUSE daemon as abnormal and remounts it", func() {
		g := newGatedMounter(&mounter.Process{Binary: bin})
		p := startPlugin(w, g, 200*time.Millisecond)
		done := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			_, err := p.node.NodeStageVolume(ctx, stageReq(w))
			done <- err
		}()
		Eventually(g.entered, 10*time.Second).Should(Receive())
		g.gate <- struct{}{}
		Expect(<-done).To(Succeed())
		_, err := p.node.NodePublishVolume(ctx, publishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		target := w.target("pod-a")
		statsReq := &csi.NodeGetVolumeStatsRequest{VolumeId: w.id(), VolumePath: target}
		stats, err := p.node.NodeGetVolumeStats(ctx, statsReq)
		Expect(err).NotTo(HaveOccurred())
		Expect(stats.GetVolumeCondition().GetAbnormal()).To(BeFalse())
		Expect(stats.GetUsage()).NotTo(BeEmpty())

		By("killing the daemon")
		Expect(syscall.Kill(w.daemonPID(), syscall.SIGKILL)).To(Succeed())
		// The watcher notices and starts a remount, which the gate holds.
		Eventually(g.entered, 10*time.Second).Should(Receive())
		stats, err = p.node.NodeGetVolumeStats(ctx, statsReq)
		Expect(err).NotTo(HaveOccurred())
		Expect(stats.GetVolumeCondition().GetAbnormal()).To(BeTrue())
		Expect(stats.GetVolumeCondition().GetMessage()).To(ContainSubstring("gone"))
		Expect(w.lease()).NotTo(BeNil())

		By("letting the watcher remount")
		g.gate <- struct{}{}
		Eventually(func(g Gomega) {
			stats, err := p.node.NodeGetVolumeStats(ctx, statsReq)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stats.GetVolumeCondition().GetAbnormal()).To(BeFalse(), stats.GetVolumeCondition().GetMessage())
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		Eventually(w.mountLostEvents, 10*time.Second, 100*time.Millisecond).Should(ContainElement(ContainSubstring("node " + nodeName)))
		data := pattern(2<<20, 7)
		Expect(os.WriteFile(filepath.Join(target, "after-remount.bin"), data, 0o644)).To(Succeed())
		Expect(os.ReadFile(filepath.Join(w.staging, "after-remount.bin"))).To(Equal(data))

		_, err = p.node.NodeUnpublishVolume(ctx, unpublishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(err).NotTo(HaveOccurred())
		Expect(w.lease()).To(BeNil())
	})
})

// ioLoop writes files through a target and reads each back, until stopped.
type ioLoop struct {
	quit chan struct{}
	done chan ioResult
}

type ioResult struct {
	files int
	err   error
}

func ioName(i int) string { return fmt.Sprintf("during-%03d.bin", i) }
func ioData(i int) []byte { return pattern(256<<10, byte(i)) }

func startIO(target string) *ioLoop {
	l := &ioLoop{quit: make(chan struct{}), done: make(chan ioResult, 1)}
	go func() {
		for i := 0; ; i++ {
			select {
			case <-l.quit:
				l.done <- ioResult{files: i}
				return
			default:
			}
			path := filepath.Join(target, ioName(i))
			err := os.WriteFile(path, ioData(i), 0o644)
			var got []byte
			if err == nil {
				got, err = os.ReadFile(path)
			}
			if err == nil && !bytes.Equal(got, ioData(i)) {
				err = fmt.Errorf("%s read back differs", path)
			}
			if err != nil {
				l.done <- ioResult{files: i, err: err}
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return l
}

// stop ends the loop and returns how many files it wrote and read back; it
// fails the spec if any write or read failed.
func (l *ioLoop) stop() int {
	close(l.quit)
	r := <-l.done
	Expect(r.err).NotTo(HaveOccurred())
	return r.files
}

var _ = Describe("Unstage of a mount that cannot publish", func() {
	It("fails and keeps the Lease until the daemon has published", func() {
		w := newWorld()
		w.instance = "lost"
		ownBacking := GinkgoT().TempDir()
		own := startServers(1, ownBacking, GinkgoT().TempDir())
		DeferCleanup(func() {
			for _, s := range own {
				_ = s.cmd.Process.Kill()
				_ = s.cmd.Wait()
			}
		})
		createInstance(w.instance, own)
		p := startPlugin(w, &mounter.Process{Binary: bin}, time.Hour)
		_, err := p.node.NodeStageVolume(ctx, stageReq(w))
		Expect(err).NotTo(HaveOccurred())
		_, err = p.node.NodePublishVolume(ctx, publishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		tail := pattern(1000, 5)
		f, err := os.Create(filepath.Join(w.target("pod-a"), "grown.bin"))
		Expect(err).NotTo(HaveOccurred())
		_, err = f.WriteAt(tail, 3<<20)
		Expect(err).NotTo(HaveOccurred())

		By("losing the server before the file is closed and the volume unstaged")
		Expect(own[0].cmd.Process.Kill()).To(Succeed())
		_ = own[0].cmd.Wait()
		// A close makes the file durable and publishes its size: it cannot,
		// and says so, and the size stays with the daemon.
		Expect(f.Close()).NotTo(Succeed())
		_, err = p.node.NodeUnpublishVolume(ctx, unpublishReq(w, "pod-a"))
		Expect(err).NotTo(HaveOccurred())
		for range 2 {
			_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
			Expect(codeOf(nil, err)).To(Equal(codes.Internal))
			Expect(err.Error()).To(ContainSubstring("did not publish"))
			Expect(w.lease()).NotTo(BeNil(), "the operator must keep waiting for this node")
		}

		By("not releasing the volume later either: the daemon that held the sizes is gone")
		own[0] = startServer(own[0].args)
		_, err = p.node.NodeUnstageVolume(ctx, unstageReq(w))
		Expect(codeOf(nil, err)).To(Equal(codes.Internal))
		Expect(w.lease()).NotTo(BeNil())
		Expect(isMounted(w.staging)).To(BeFalse())
	})
})

// errOf returns the error of a call.
func errOf(_ any, err error) error { return err }
