// Four threads each add up a series while allocating and dropping arrays (so the JVM's
// collector runs), then main prints the total: `java -cp DIR Tally`.
public class Tally {
    static long total;

    static synchronized void add(long part) {
        total += part;
    }

    public static void main(String[] args) throws InterruptedException {
        Thread[] workers = new Thread[4];
        for (int k = 0; k < workers.length; k++) {
            final int n = k + 1;
            workers[k] = new Thread(() -> {
                java.util.ArrayList<long[]> kept = new java.util.ArrayList<>();
                long sum = 0;
                for (int i = 0; i < 50000; i++) {
                    long[] block = new long[1000];
                    block[i % 1000] = (long) i * n;
                    kept.add(block);
                    if (kept.size() > 200) {
                        for (long[] b : kept) sum += b[i % 1000] + b[0];
                        kept.clear();
                    }
                }
                add(sum);
            });
            workers[k].start();
        }
        for (Thread w : workers) w.join();
        System.out.println("total " + total);
    }
}
