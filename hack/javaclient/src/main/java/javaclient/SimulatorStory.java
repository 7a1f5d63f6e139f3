package javaclient;

import static org.ovirt.engine.sdk4.builders.Builders.affinityGroup;
import static org.ovirt.engine.sdk4.builders.Builders.affinityRule;
import static org.ovirt.engine.sdk4.builders.Builders.cluster;
import static org.ovirt.engine.sdk4.builders.Builders.cpu;
import static org.ovirt.engine.sdk4.builders.Builders.cpuTopology;
import static org.ovirt.engine.sdk4.builders.Builders.initialization;
import static org.ovirt.engine.sdk4.builders.Builders.tag;
import static org.ovirt.engine.sdk4.builders.Builders.template;
import static org.ovirt.engine.sdk4.builders.Builders.vm;

import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.util.List;
import java.util.function.Supplier;

import org.ovirt.engine.sdk4.Connection;
import org.ovirt.engine.sdk4.ConnectionBuilder;
import org.ovirt.engine.sdk4.Error;
import org.ovirt.engine.sdk4.services.AffinityGroupService;
import org.ovirt.engine.sdk4.services.AffinityGroupsService;
import org.ovirt.engine.sdk4.services.SystemService;
import org.ovirt.engine.sdk4.services.VmService;
import org.ovirt.engine.sdk4.types.AffinityGroup;
import org.ovirt.engine.sdk4.types.Cluster;
import org.ovirt.engine.sdk4.types.Ip;
import org.ovirt.engine.sdk4.types.ReportedDevice;
import org.ovirt.engine.sdk4.types.Tag;
import org.ovirt.engine.sdk4.types.Template;
import org.ovirt.engine.sdk4.types.Vm;
import org.ovirt.engine.sdk4.types.VmStatus;

/**
 * A machine's life as the oVirt Java SDK lives it against the simulator: log in, find the template and the
 * cluster, create a VM with an Ignition payload (initialization custom_script, as the Go provider does), put it in
 * an affinity group, tag it, start it (the first start meets the fault the test injected and is retried, as a
 * controller retries a transient engine fault), read its reported devices, stop it and remove it.
 *
 * Arguments: URL USER PASSWORD CA_FILE VM_NAME. One line per step on stdout ("step NAME key=value ..."); any
 * disagreement exits non-zero with the reason, so the test sees which step a stricter client refused.
 */
public final class SimulatorStory {
    private static final long GIB = 1L << 30;
    private static final String IGNITION = "{\"ignition\":{\"version\":\"3.2.0\"},\"storage\":{\"files\":"
        + "[{\"path\":\"/etc/hostname\",\"contents\":{\"source\":\"data:,java\"}}]}}";

    private SimulatorStory() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: SimulatorStory URL USER PASSWORD CA_FILE VM_NAME");
            System.exit(2);
        }
        step("jvm");
        String url = args[0];
        String name = args[4];
        Path trustStore = trustStoreOf(Path.of(args[3]));
        try (Connection connection = ConnectionBuilder.connection()
                .url(url).user(args[1]).password(args[2])
                .trustStoreFile(trustStore.toString()).trustStorePassword("ovirtsim")
                .build()) {
            connection.authenticate();
            step("login");
            run(connection.systemService(), name);
        } catch (Error | IllegalStateException e) {
            System.err.println("FAILED: " + e.getMessage());
            System.exit(1);
        } finally {
            Files.deleteIfExists(trustStore);
        }
        System.out.println("done");
    }

    private static void run(SystemService system, String name) throws Exception {
        Template template = system.templatesService().list().search("name=rhcos").send().templates().get(0);
        Cluster cluster = system.clustersService().list().search("name=Default").send().clusters().get(0);
        step("lookup", "template=" + template.id(), "cluster=" + cluster.id());

        Vm created = system.vmsService().add()
            .vm(vm().name(name)
                .cluster(cluster().id(cluster.id()))
                .template(template().id(template.id()))
                .memory(4 * GIB)
                .cpu(cpu().topology(cpuTopology().cores(2).sockets(1).threads(1)))
                .initialization(initialization().customScript(IGNITION).hostName(name)))
            .clone_(true)
            .send().vm();
        require(created.commentPresent(), "a new VM is served with its (empty) comment");
        VmService vmService = system.vmsService().vmService(created.id());
        step("create", "vm=" + created.id(), "status=" + created.status().value());
        waitFor(() -> vmService.get().send().vm().status() == VmStatus.DOWN, "the VM is down after its disks");

        AffinityGroupsService groups = system.clustersService().clusterService(cluster.id()).affinityGroupsService();
        AffinityGroup group = groups.add()
            .group(affinityGroup().name(name + "-group")
                .vmsRule(affinityRule().enabled(true).enforcing(false).positive(false)))
            .send().group();
        require(group.priorityPresent(), "an affinity group is served with its priority");
        AffinityGroupService groupService = groups.groupService(group.id());
        groupService.vmsService().add().vm(vm().id(created.id())).send();
        List<Vm> members = groupService.vmsService().list().send().vms();
        require(members.size() == 1 && members.get(0).id().equals(created.id()), "the VM is the group's member");
        step("affinity", "group=" + group.id(), "priority=" + group.priority(), "members=" + members.size());

        Tag clusterTag = system.tagsService().add().tag(tag().name(name + "-tag")).send().tag();
        vmService.tagsService().add().tag(tag().name(clusterTag.name())).send();
        List<Tag> tags = vmService.tagsService().list().send().tags();
        require(tags.stream().anyMatch(t -> t.id().equals(clusterTag.id())), "the VM carries the tag");
        step("tag", "tag=" + clusterTag.id());

        try {
            vmService.start().send();
            throw new IllegalStateException("the first start should have met the injected fault");
        } catch (Error e) {
            require(e.getMessage().contains("HTTP response code is \"409\""), "the injected fault is a 409");
            step("fault", "message=" + e.getMessage().replace(' ', '_'));
        }
        vmService.start().send();
        waitFor(() -> vmService.get().send().vm().status() == VmStatus.UP, "the VM is up");
        List<ReportedDevice> devices = waitForDevices(vmService);
        for (ReportedDevice device : devices) {
            StringBuilder ips = new StringBuilder();
            for (Ip ip : device.ips()) {
                ips.append(ips.length() > 0 ? "," : "").append(ip.address());
            }
            step("device", "name=" + device.name(), "mac=" + device.mac().address(), "ips=" + ips);
        }
        Vm up = vmService.get().send().vm();
        step("start", "status=" + up.status().value(), "host=" + up.host().id(), "fqdn=" + up.fqdn());
        survey(system, vmService, cluster);

        vmService.stop().send();
        waitFor(() -> vmService.get().send().vm().status() == VmStatus.DOWN, "the VM is down after stop");
        step("stop");
        vmService.remove().send();
        try {
            vmService.get().send();
            throw new IllegalStateException("the removed VM is still there");
        } catch (Error e) {
            require(e.getMessage().contains("\"404\""), "a removed VM is a 404");
        }
        groupService.remove().send();
        system.tagsService().tagService(clusterTag.id()).remove().send();
        step("remove", "vm=" + created.id());
    }

    /** Every other type the simulator serves, read once through the SDK's own readers (they log what they
     *  cannot read, and the test fails on any such line). */
    private static void survey(SystemService system, VmService vmService, Cluster cluster) {
        int objects = 0;
        objects += system.get().send().api().productInfo().version().major().intValue() > 0 ? 1 : 0;
        objects += system.dataCentersService().list().send().dataCenters().size();
        objects += system.clustersService().clusterService(cluster.id()).get().send().cluster().idPresent() ? 1 : 0;
        objects += system.hostsService().list().send().hosts().size();
        objects += system.storageDomainsService().list().send().storageDomains().size();
        objects += system.networksService().list().send().networks().size();
        objects += system.vnicProfilesService().list().send().profiles().size();
        objects += system.templatesService().list().follow("disk_attachments.disk,nics").send().templates().size();
        objects += system.instanceTypesService().list().send().instanceType().size();
        objects += system.disksService().list().send().disks().size();
        objects += system.tagsService().list().send().tags().size();
        var jobs = system.jobsService().list().send().jobs();
        objects += jobs.size();
        objects += system.jobsService().jobService(jobs.get(0).id()).stepsService().list().send().steps().size();
        objects += vmService.get().follow("disk_attachments.disk,nics,reported_devices,tags").send().vm()
            .diskAttachments().size();
        objects += vmService.nicsService().list().send().nics().size();
        objects += vmService.diskAttachmentsService().list().send().attachments().size();
        objects += vmService.graphicsConsolesService().list().send().consoles().size();
        objects += vmService.snapshotsService().list().send().snapshots().size();
        objects += vmService.cdromsService().list().send().cdroms().size();
        objects += system.clustersService().clusterService(cluster.id()).affinityGroupsService().list().send()
            .groups().size();
        step("survey", "objects=" + objects);
    }

    private static List<ReportedDevice> waitForDevices(VmService vmService) throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (true) {
            List<ReportedDevice> devices = vmService.reportedDevicesService().list().send().reportedDevice();
            if (!devices.isEmpty()) {
                return devices;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("the guest agent never reported devices");
            }
            Thread.sleep(100);
        }
    }

    private static void waitFor(Supplier<Boolean> condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!condition.get()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("timed out waiting until " + what);
            }
            Thread.sleep(100);
        }
    }

    private static void require(boolean condition, String what) {
        if (!condition) {
            throw new IllegalStateException("expected: " + what);
        }
    }

    /** One line per step, with the milliseconds since the JVM started (to tell JVM start-up from the story). */
    private static void step(String name, String... facts) {
        long ms = System.currentTimeMillis() - ManagementFactory.getRuntimeMXBean().getStartTime();
        System.out.println("step " + name + " ms=" + ms + (facts.length > 0 ? " " + String.join(" ", facts) : ""));
    }

    /** The SDK verifies TLS against a trust store file; the simulator hands out a PEM CA file, like the engine. */
    private static Path trustStoreOf(Path caFile) throws Exception {
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        try (InputStream in = new FileInputStream(caFile.toFile())) {
            Certificate ca = CertificateFactory.getInstance("X.509").generateCertificate(in);
            store.setCertificateEntry("ovirtsim-ca", ca);
        }
        Path file = Files.createTempFile("ovirtsim-trust", ".p12");
        try (OutputStream out = new FileOutputStream(file.toFile())) {
            store.store(out, "ovirtsim".toCharArray());
        }
        return file;
    }
}
