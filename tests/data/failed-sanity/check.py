import reframe as rfm
import reframe.utility.sanity as sn

class Base(rfm.RunOnlyRegressionTest):
    valid_systems = ['*']
    valid_prog_environs = ['*']
    executable = 'echo'
    executable_opts = ['rate 5.0']
    image = variable(str, value='host', loggable=True)
    num_nodes = variable(int, value=2, loggable=True)
    run_settings = variable(str, value='epochs=10;batch_size=64', loggable=True)
    software_stack = variable(str, value='', loggable=True)
    @sanity_function
    def ok(self):
        return sn.assert_found(self.pattern, self.stdout)
    @performance_function('samples/s')
    def samples_per_s(self):
        return sn.extractsingle(r'rate (\S+)', self.stdout, 1, float)

@rfm.simple_test
class GoodCheck(Base):
    pattern = variable(str, value='rate')

@rfm.simple_test
class BrokenCheck(Base):
    pattern = variable(str, value='rate')
