package controllers_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

// readyWithDirtyData creates an instance of n real servers, waits until it
// is Ready, writes 2Mi through a real mount to results/out.dat and waits
// until the servers report it dirty.
func readyWithDirtyData(w *world, capacity string, n int) (*cachev1alpha1.CacheInstance, []string, []byte) {
	GinkgoHelper()
	inst := w.instance(capacity)
	Expect(k8sClient.Create(ctx, inst)).To(Succeed())
	addrs := kl.RunServers(ctx, inst, n)
	Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
	data := bytes.Repeat([]byte("0123456789abcdef"), 128<<10)
	writeThroughMount(inst, addrs, "results/out.dat", data)
	Eventually(func(g Gomega) int64 {
		u := get(inst)(g).Status.Usage
		g.Expect(u).NotTo(BeNil())
		return u.Dirty.Value()
	}, 20*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", len(data)))
	return inst, addrs, data
}

// readThroughMount reads rel through a fresh real FUSE mount of the
// servers, so that nothing the mount itself kept is read.
func readThroughMount(inst *cachev1alpha1.CacheInstance, addrs []string, rel string) []byte {
	GinkgoHelper()
	mp := filepath.Join(GinkgoT().TempDir(), "mnt")
	Expect(os.Mkdir(mp, 0o755)).To(Succeed())
	readyFile := mp + ".ready"
	cmd := exec.Command(bin, "mount", "--servers", strings.Join(addrs, ","), "--secret-file", dataSecretFile(inst), "--ready-file", readyFile, mp)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	Expect(cmd.Start()).To(Succeed())
	Eventually(func() error { _, err := os.Stat(readyFile); return err }, 20*time.Second, 50*time.Millisecond).
		Should(Succeed(), "mount did not start: %s", &log)
	data, err := os.ReadFile(filepath.Join(mp, rel))
	Expect(err).NotTo(HaveOccurred(), "mount log: %s", &log)
	Expect(cmd.Process.Signal(syscall.SIGTERM)).To(Succeed())
	Expect(cmd.Wait()).To(Succeed(), "mount log: %s", &log)
	return data
}

// flushed writes rel of inst back with a flush hint sent with kubeconfig,
// and checks it succeeded.
func flushed(kubeconfig string, inst *cachev1alpha1.CacheInstance, rel string) {
	GinkgoHelper()
	r := kubectlBurstcache(kubeconfig, inst.Namespace, "flush", inst.Name, rel, "--poll-interval=200ms", "--timeout=60s")
	Expect(r.code).To(Equal(0), r.err)
}

// cached returns the instance's cached bytes as status reports them.
func cached(inst *cachev1alpha1.CacheInstance) func(Gomega) int64 {
	return func(g Gomega) int64 {
		u := get(inst)(g).Status.Usage
		g.Expect(u).NotTo(BeNil())
		return u.Cached.Value()
	}
}

var _ = Describe("User hints", func() {
	var admin string
	BeforeEach(func() { admin = kubeconfigOf("hints-admin", "system:masters") })

	It("reports the bytes written in the write window in status", func() {
		w := newWorld()
		inst, _, data := readyWithDirtyData(w, "64Mi", 1)
		Eventually(func(g Gomega) int64 {
			return get(inst)(g).Status.Usage.WindowBytesWritten
		}, 10*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", len(data)))
	})

	It("labels the servers' metrics with the instance's namespace and name", func() {
		w := newWorld()
		inst, _, data := readyWithDirtyData(w, "64Mi", 1)
		pods := serverPods(inst)
		Expect(pods).To(HaveLen(1))
		addr, err := kl.Resolve(ctx, &pods[0])
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.Get("http://" + addr + "/metrics")
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(body)).To(MatchRegexp(`(?m)^burstcache_dirty_bytes\{namespace="%s",instance="%s",server="0"\} \S+$`, w.ns, inst.Name))
		m := regexp.MustCompile(`(?m)^burstcache_written_bytes_total\{namespace="` + w.ns + `",instance="` + inst.Name + `",server="0"\} (\S+)$`).FindSubmatch(body)
		Expect(m).NotTo(BeNil(), "%s", body)
		Expect(strconv.ParseFloat(string(m[1]), 64)).To(BeNumerically(">=", len(data)))
	})

	It("evicts a path after writing it back: usage shows the data gone and the backing file has it", func() {
		w := newWorld()
		inst, _, data := readyWithDirtyData(w, "128Mi", 2)
		Expect(cached(inst)(Default)).To(BeNumerically(">=", len(data)))

		r := kubectlBurstcache(admin, w.ns, "evict", inst.Name, "results", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		Expect(r.out).To(ContainSubstring("evict results: Succeeded"))
		Eventually(cached(inst), 10*time.Second, 200*time.Millisecond).Should(BeNumerically("<", len(data)))
		Expect(os.ReadFile(filepath.Join(w.hostPath(w.backing), "results", "out.dat"))).To(Equal(data))
	})

	It("invalidates a path so that a change made on the backing file system behind the cache is seen", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		file := filepath.Join(w.hostPath(w.backing), "input.dat")
		before, after := bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)
		// A file written through the cache, which the cache does not check
		// for changes in place: its own write-back changes it.
		writeThroughMount(inst, addrs, "input.dat", before)
		flushed(admin, inst, "input.dat")
		Expect(os.ReadFile(file)).To(Equal(before))

		By("changing the file behind the cache's back: the cache still serves what it holds")
		Expect(os.WriteFile(file, after, 0o644)).To(Succeed())
		Expect(readThroughMount(inst, addrs, "input.dat")).To(Equal(before))

		r := kubectlBurstcache(admin, w.ns, "invalidate", inst.Name, "input.dat", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		Expect(readThroughMount(inst, addrs, "input.dat")).To(Equal(after))
	})

	It("invalidates a path in the kernel of a mount with the client cache, which stays up", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		file := filepath.Join(w.hostPath(w.backing), "input.dat")
		before, after := bytes.Repeat([]byte("a"), 3<<20), bytes.Repeat([]byte("b"), 5000)
		mp, mount, log := startMount(inst, addrs, "--client-cache")
		defer func() {
			Expect(mount.Process.Signal(syscall.SIGTERM)).To(Succeed())
			Expect(mount.Wait()).To(Succeed(), "mount log: %s", log)
		}()
		// Written through this mount, whose kernel then keeps its pages
		// and size when the file changes in place.
		writeUnder(mp, "input.dat", before, log)
		flushed(admin, inst, "input.dat")
		Expect(os.ReadFile(filepath.Join(mp, "input.dat"))).To(Equal(before))

		By("shrinking the file behind the cache's back: the node's kernel still has the old one")
		Expect(os.WriteFile(file, after, 0o644)).To(Succeed())
		Expect(os.ReadFile(filepath.Join(mp, "input.dat"))).To(Equal(before))

		r := kubectlBurstcache(admin, w.ns, "invalidate", inst.Name, "input.dat", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		Expect(os.ReadFile(filepath.Join(mp, "input.dat"))).To(Equal(after))
	})

	It("fails a request whose path is missing, with the reason, and takes a new id afterwards", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		r := kubectlBurstcache(admin, w.ns, "preload", inst.Name, "no/such/dir", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(1))
		Expect(r.err).To(And(ContainSubstring("preload request"), ContainSubstring("no such file")))
		st := get(inst)(Default).Status.LastRequest
		Expect(st.Phase).To(Equal(cachev1alpha1.RequestFailed))
		Expect(st.CompletedAt).NotTo(BeNil())
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonRequestFailed))

		Expect(os.MkdirAll(filepath.Join(w.hostPath(w.backing), "in"), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(w.hostPath(w.backing), "in", "x"), bytes.Repeat([]byte("x"), 1<<20), 0o644)).To(Succeed())
		r = kubectlBurstcache(admin, w.ns, "preload", inst.Name, "in", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		Eventually(cached(inst), 10*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", 1<<20))
	})

	It("refuses hint paths the API cannot carry, and runs one of any other characters as written", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		r := kubectlBurstcache(admin, w.ns, "flush", inst.Name, "caf\xe9", "--timeout=60s")
		Expect(r.code).NotTo(Equal(0))
		Expect(r.err).To(ContainSubstring("not valid UTF-8"))
		Expect(get(inst)(Default).Annotations).NotTo(HaveKey(cachev1alpha1.AnnotationRequest))

		odd := "caf\u00e9 \"-rf\"\\x/new\nline\ttab"
		Expect(os.MkdirAll(filepath.Join(w.hostPath(w.backing), odd), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(w.hostPath(w.backing), odd, "x"), bytes.Repeat([]byte("x"), 1<<20), 0o644)).To(Succeed())
		r = kubectlBurstcache(admin, w.ns, "preload", inst.Name, odd, "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(0), r.err)
		Expect(get(inst)(Default).Status.LastRequest.Path).To(Equal(odd))
		Eventually(cached(inst), 10*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", 1<<20))

		r = kubectlBurstcache(admin, w.ns, "preload", inst.Name, strings.Repeat("d/", 2100)+"f", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(1))
		Expect(r.err).To(ContainSubstring("PATH_MAX"))
		Consistently(func(g Gomega) string { return get(inst)(g).Status.LastRequest.Path }, 2*time.Second, 200*time.Millisecond).Should(Equal(odd))
	})

	It("fails a preload of a tree with many directories runAs cannot list, with what it could not read", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		// The server names up to 20 directories it passed over, in more
		// words than a status message or an Event holds.
		tree := filepath.Join(w.hostPath(w.backing), "closed-to-the-job-with-a-long-name")
		for i := range 40 {
			d := filepath.Join(tree, strings.Repeat("a-directory-that-runAs-may-not-list-", 5)+strconv.Itoa(i))
			Expect(os.MkdirAll(d, 0o755)).To(Succeed())
			Expect(os.Chmod(d, 0)).To(Succeed())
		}
		Expect(os.WriteFile(filepath.Join(tree, "readable"), bytes.Repeat([]byte("r"), 1<<20), 0o644)).To(Succeed())

		r := kubectlBurstcache(admin, w.ns, "preload", inst.Name, "closed-to-the-job-with-a-long-name", "--poll-interval=200ms", "--timeout=60s")
		Expect(r.code).To(Equal(1), r.out+r.err)
		Expect(r.err).To(And(ContainSubstring("preload request"), ContainSubstring("permission denied")))
		st := get(inst)(Default).Status.LastRequest
		Expect(st.Phase).To(Equal(cachev1alpha1.RequestFailed))
		Expect(st.Message).To(ContainSubstring("a-directory-that-runAs-may-not-list-"))
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonRequestFailed))
		Eventually(cached(inst), 10*time.Second, 200*time.Millisecond).Should(BeNumerically(">=", 1<<20))
	})

	It("retries a flush that fails with backoff, keeping the data, until it can write back", func() {
		w := newWorld()
		inst, _, data := readyWithDirtyData(w, "64Mi", 1)
		out := filepath.Join(w.hostPath(w.backing), "results", "out.dat")
		// Another owner makes every write-back as runAs fail with EACCES.
		Expect(os.Chown(out, 2000, 2000)).To(Succeed())

		r := kubectlBurstcache(admin, w.ns, "flush", inst.Name, "--poll-interval=200ms", "--timeout=30s")
		Expect(r.code).To(Equal(1))
		Expect(r.out).To(MatchRegexp(`flush -: Retrying, dirty [1-9]\S*: `))
		cur := get(inst)(Default)
		Expect(cur.Status.LastRequest.Phase).To(Equal(cachev1alpha1.RequestRetrying))
		Expect(cur.Status.Usage.Dirty.Value()).To(BeNumerically(">=", len(data)), "dirty data was dropped")
		Expect(eventReasons(w.ns, inst.Name)).To(ContainElement(cachev1alpha1.ReasonRequestRetrying))

		Expect(os.Chown(out, runAsUID, runAsGID)).To(Succeed())
		Eventually(func(g Gomega) cachev1alpha1.RequestPhase {
			return get(inst)(g).Status.LastRequest.Phase
		}, 60*time.Second, 500*time.Millisecond).Should(Equal(cachev1alpha1.RequestSucceeded))
		Expect(os.ReadFile(out)).To(Equal(data))
	})

	It("refuses a hint for an instance being deleted, which no pass would run", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))
		// A node that still has the instance staged holds the teardown.
		lease := createMountLease(inst, "node-a", "")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(phaseOf(inst), 10*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseFlushing))

		run := kubectlBurstcache(admin, w.ns, "flush", inst.Name, "--timeout", "5s")
		Expect(run.code).NotTo(BeZero())
		Expect(run.err).To(ContainSubstring("being deleted"))

		Expect(k8sClient.Delete(ctx, lease)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
	})
})
