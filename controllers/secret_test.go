package controllers_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cachev1alpha1 "github.com/burstcache/burstcache/api/v1alpha1"
)

var _ = Describe("Data-path secret", func() {
	It("starts servers with the instance's secret, refuses clients without it, and deletes it at teardown", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		addrs := kl.RunServers(ctx, inst, 1)
		Eventually(phaseOf(inst), 20*time.Second, 200*time.Millisecond).Should(Equal(cachev1alpha1.PhaseReady))

		sec := &corev1.Secret{}
		key := client.ObjectKey{Namespace: w.ns, Name: cachev1alpha1.DataSecretName(inst.Name)}
		Expect(k8sClient.Get(ctx, key, sec)).To(Succeed())
		Expect(sec.Labels).To(HaveKeyWithValue(cachev1alpha1.LabelInstance, inst.Name))
		Expect(sec.Data[cachev1alpha1.DataSecretKey]).To(HaveLen(64))
		Expect(serverPods(inst)[0].Spec.Containers[0].Args).To(ContainElement(HavePrefix("--secret-file=")))

		By("refusing a mount that does not hold the secret")
		out, err := mountOnce(addrs, "")
		Expect(err).To(HaveOccurred(), "a mount without the secret was admitted: %s", out)
		Expect(out).To(ContainSubstring("permission denied"))

		By("refusing a mount that holds another secret")
		wrong := filepath.Join(GinkgoT().TempDir(), "wrong")
		Expect(os.WriteFile(wrong, bytes.Repeat([]byte("0"), 64), 0o600)).To(Succeed())
		out, err = mountOnce(addrs, wrong)
		Expect(err).To(HaveOccurred(), "a mount with a wrong secret was admitted: %s", out)

		By("admitting a mount that holds it")
		data := []byte("written with the instance's secret")
		writeThroughMount(inst, addrs, "s/ok.txt", data)

		By("writing back and deleting the secret at teardown")
		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 60*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(os.ReadFile(filepath.Join(w.hostPath(w.backing), "s", "ok.txt"))).To(Equal(data))
		Expect(gone(sec)()).To(BeTrue(), "the data secret outlived its instance")
	})

	It("neither trusts nor deletes a Secret of the data secret's name that it did not make", func() {
		w := newWorld()
		inst := w.instance("64Mi")
		inst.Name, inst.GenerateName = "app", ""
		theirs := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: cachev1alpha1.DataSecretName(inst.Name)},
			Data:       map[string][]byte{"password": []byte("an application's own secret")},
		}
		Expect(k8sClient.Create(ctx, theirs)).To(Succeed())
		Expect(k8sClient.Create(ctx, inst)).To(Succeed())
		Eventually(func(g Gomega) string {
			c := meta.FindStatusCondition(get(inst)(g).Status.Conditions, cachev1alpha1.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			return c.Message
		}, 20*time.Second, 200*time.Millisecond).Should(ContainSubstring("is not the instance's data secret"))
		Expect(serverPods(inst)).To(BeEmpty())

		Expect(k8sClient.Delete(ctx, inst)).To(Succeed())
		Eventually(gone(inst), 30*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed(), "the teardown deleted a Secret it did not make")
		Expect(theirs.Data).To(HaveKeyWithValue("password", []byte("an application's own secret")))
	})
})

// mountOnce starts `burstcache mount` against addrs, with secretFile if not
// empty, and returns its output and error once it exits; a mount that
// starts serving is stopped and reported as a success.
func mountOnce(addrs []string, secretFile string) (string, error) {
	GinkgoHelper()
	mp := filepath.Join(GinkgoT().TempDir(), "mnt")
	Expect(os.Mkdir(mp, 0o755)).To(Succeed())
	args := []string{"mount", "--servers", strings.Join(addrs, ","), "--ready-file", mp + ".ready"}
	if secretFile != "" {
		args = append(args, "--secret-file", secretFile)
	}
	cmd := exec.Command(bin, append(args, mp)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	Expect(cmd.Start()).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return log.String(), err
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Signal(os.Interrupt)
		return log.String(), <-done
	}
}
