/// haul's version, as `haul --version` prints it and as its User-Agent carries it.
public enum HaulVersion {
    public static let string = "0.1.0"
}
